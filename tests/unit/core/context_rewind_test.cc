// Context::Rewind: back, in place, to an earlier snapshot — appends, tool results, a compaction and
// the originals kept since undone, the journal told with one change, and nothing changed when the
// journal refuses or the snapshot is inconsistent.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "strata/compaction_policy.h"
#include "strata/context.h"
#include "testing/context_testing.h"

namespace strata {
namespace {

using testing::MustBuild;
using testing::MustPreview;
using testing::NewContext;

class RecordingJournal : public ContextJournal {
 public:
  Status Record(const ContextChange& change) override {
    if (fail) return UnavailableError("disk full");
    changes.push_back(change);
    return Status::Ok();
  }
  bool fail = false;
  std::vector<ContextChange> changes;
};

std::vector<std::string> Ids(const Context& context) {
  std::vector<std::string> ids;
  for (const Segment& s : context.Segments()) ids.push_back(s.id);
  return ids;
}

TEST_CASE("Rewind undoes appends, keeps the volatile layer and never reuses an id",
          "[core][context][rewind]") {
  RecordingJournal journal;
  ContextOptions options;
  options.journal = &journal;
  auto context = NewContext(options);
  REQUIRE(context->SetSystemPrompt("sys").ok());
  REQUIRE(context->AppendUser("first").ok());
  REQUIRE(context->AppendAssistant({"done", "", {}}).ok());
  const std::string before = MustPreview(*context).body;
  const std::vector<std::string> ids_before = Ids(*context);
  const ContextSnapshot snapshot = context->Snapshot();

  REQUIRE(context->AppendUser("second").ok());
  REQUIRE(context->AppendAssistant({"", "", {{"c1", "bash", "{}"}}}).ok());
  REQUIRE(context->AppendToolResult({"c1", "output", false}).ok());
  REQUIRE(context->SetVolatile("time", "18:30").ok());
  const size_t journaled = journal.changes.size();

  REQUIRE(context->Rewind(snapshot).ok());
  CHECK(Ids(*context).size() == ids_before.size() + 1);  // the volatile item is kept, last
  CHECK(context->Stats().turns == 1);
  CHECK(context->OpenToolCalls().empty());
  context->ClearVolatile();
  CHECK(MustPreview(*context).body == before);
  CHECK(Ids(*context) == ids_before);
  REQUIRE(journal.changes.size() == journaled + 1);
  const ContextChange& change = journal.changes.back();
  CHECK(change.removed_ids.size() == 3);
  CHECK(change.upserted.empty());
  CHECK(change.turn == 1);
  // A new segment gets a new id, not the one of an undone segment.
  const std::string id = *context->AppendUser("third");
  CHECK(std::find(change.removed_ids.begin(), change.removed_ids.end(), id) ==
        change.removed_ids.end());
  // Rewinding to what the context holds records nothing.
  const size_t now = journal.changes.size();
  REQUIRE(context->Rewind(context->Snapshot()).ok());
  CHECK(journal.changes.size() == now);
}

TEST_CASE("Rewind undoes a compaction and drops the originals kept since",
          "[core][context][rewind]") {
  RecordingJournal journal;
  ContextOptions options;
  options.journal = &journal;
  auto context = NewContext(options);
  REQUIRE(context->AppendUser("go").ok());
  REQUIRE(context->AppendAssistant({"", "", {{"c1", "bash", "{}"}}}).ok());
  REQUIRE(context->AppendToolResult({"c1", std::string(400, 'x'), false}).ok());
  REQUIRE(context->AppendUser("next").ok());
  const std::string before = MustPreview(*context).body;
  const ContextSnapshot snapshot = context->Snapshot();
  std::string result_id;
  for (const Segment& s : context->Segments())
    if (s.tool_call_id == "c1") result_id = s.id;

  HistoryEdit edit;
  edit.edits.push_back({result_id, SegmentEdit::Action::kMask, "[masked]"});
  CompactionReport report = *context->ApplyEdit(edit, "test@1", "test");
  const std::string recall_id = context->Find(result_id)->recall_id;
  REQUIRE_FALSE(recall_id.empty());
  REQUIRE(context->Recall(recall_id).ok());
  CHECK(MustPreview(*context).body != before);

  REQUIRE(context->Rewind(snapshot).ok());
  CHECK(MustPreview(*context).body == before);
  CHECK(context->Recall(recall_id).status().code() == StatusCode::kNotFound);
  CHECK(context->Find(result_id)->state == SegmentState::kLive);
  const ContextChange& change = journal.changes.back();
  REQUIRE(change.upserted.size() == 1);
  CHECK(change.upserted[0].id == result_id);
  CHECK(change.removed_originals == std::vector<std::string>{recall_id});
  CHECK(context->Compactions().size() == 1);  // the history of what was applied is kept
}

TEST_CASE("Rewind changes nothing when the journal refuses or the snapshot is inconsistent",
          "[core][context][rewind]") {
  RecordingJournal journal;
  ContextOptions options;
  options.journal = &journal;
  auto context = NewContext(options);
  REQUIRE(context->AppendUser("first").ok());
  const ContextSnapshot snapshot = context->Snapshot();
  REQUIRE(context->AppendAssistant({"reply", "", {}}).ok());
  const std::string after = MustPreview(*context).body;

  journal.fail = true;
  CHECK(context->Rewind(snapshot).code() == StatusCode::kUnavailable);
  CHECK(MustPreview(*context).body == after);
  journal.fail = false;

  ContextSnapshot broken = snapshot;
  broken.segments.push_back(broken.segments.front());  // a duplicate id
  const size_t journaled = journal.changes.size();
  Status refused = context->Rewind(broken);
  CHECK(refused.code() == StatusCode::kInvalidArgument);
  CHECK(refused.message().find("two segments with id") != std::string::npos);
  CHECK(journal.changes.size() == journaled);
  CHECK(MustPreview(*context).body == after);
  CHECK(MustBuild(*context).body == after);
}

// Every stored field of the segments and the originals, in id order: what Restore() would make.
std::string Describe(const ContextSnapshot& snapshot) {
  std::vector<std::string> lines;
  for (const Segment& s : snapshot.segments) {
    std::string calls;
    for (const ToolCall& c : s.tool_calls) calls += c.id + "/" + c.name + "/" + c.arguments + ";";
    lines.push_back(s.id + "|" + std::to_string(s.seq) + "|" + std::to_string(s.position) + "|" +
                    std::to_string(static_cast<int>(s.kind)) + "|" +
                    std::to_string(static_cast<int>(s.layer)) + "|" + s.content + "|" +
                    s.reasoning + "|" + calls + "|" + s.tool_call_id + "|" + s.name + "|" +
                    s.version + "|" + std::to_string(s.order) + "|" + std::to_string(s.turn) +
                    "|" + std::to_string(s.tokens) + "|" + std::to_string(s.pinned) + "|" +
                    std::to_string(static_cast<int>(s.state)) + "|" +
                    std::to_string(static_cast<int>(s.hygiene)) + "|" + s.recall_id + "|" +
                    s.duplicate_of + "|" + s.policy);
  }
  std::sort(lines.begin(), lines.end());
  std::string out = "turn " + std::to_string(snapshot.turn) + "\n";
  for (const std::string& line : lines) out += line + "\n";
  for (const auto& [recall_id, content] : snapshot.originals)
    out += recall_id + "=" + content + "\n";
  return out;
}

// What a journal change says, order aside.
std::string Describe(const ContextChange& change) {
  ContextSnapshot upserted;
  upserted.segments = change.upserted;
  upserted.originals = change.originals;
  std::sort(upserted.originals.begin(), upserted.originals.end());
  upserted.turn = change.turn;
  std::vector<std::string> removed = change.removed_ids;
  std::sort(removed.begin(), removed.end());
  std::vector<std::string> dropped = change.removed_originals;
  std::sort(dropped.begin(), dropped.end());
  std::string out = Describe(upserted) + "removed:";
  for (const std::string& id : removed) out += " " + id;
  out += "\ndropped:";
  for (const std::string& id : dropped) out += " " + id;
  return out;
}

// Builds a context with stable layers, pins, tool results (some truncated by hygiene, which keeps
// their originals) and answered calls.
std::unique_ptr<Context> MarkedContext(ContextOptions options) {
  options.hygiene.max_segment_tokens = 64;  // long results are truncated, their originals kept
  auto context = NewContext(options);
  REQUIRE(context->SetSystemPrompt("sys").ok());
  REQUIRE(context->PutDocument(Layer::kDocs, Document{"guide", "Guide one.", "v1", 0}).ok());
  REQUIRE(context->PutDocument(Layer::kDocs, Document{"notes", "Notes.", "v1", 1}).ok());
  REQUIRE(context->AppendUser("first").ok());
  for (int i = 0; i < 4; ++i) {
    const std::string id = "c" + std::to_string(i);
    REQUIRE(context->AppendAssistant({"", "", {{id, "bash", "{}"}}}).ok());
    REQUIRE(context->AppendToolResult({id, std::string(300 + i, 'a' + i), false}).ok());
  }
  return context;
}

TEST_CASE("RewindToMark equals Rewind of a snapshot taken at the mark, for every kind of change",
          "[core][context][rewind]") {
  // Each step changes the context in one way after the mark; the marked context rewound to its
  // mark must equal a second context rewound to the mark's snapshot: segments, originals, turn,
  // the rendered request and the journal's change.
  const std::vector<std::string> steps = {"append", "tool results", "pin", "document update",
                                          "document removal", "document added", "system prompt",
                                          "mask", "all"};
  for (const std::string& step : steps) {
    DYNAMIC_SECTION(step) {
      RecordingJournal marked_journal, snapshot_journal;
      ContextOptions a_options, b_options;
      a_options.journal = &marked_journal;
      b_options.journal = &snapshot_journal;
      auto a = MarkedContext(a_options);
      auto b = MarkedContext(b_options);
      const ContextSnapshot at_mark = b->Snapshot();
      const std::string body_at_mark = MustPreview(*a).body;
      a->Mark();
      for (Context* c : {a.get(), b.get()}) {
        const bool all = step == "all";
        if (all || step == "append") REQUIRE(c->AppendUser("second").ok());
        if (all || step == "tool results") {
          REQUIRE(c->AppendAssistant({"", "", {{"d1", "bash", "{}"}, {"d2", "bash", "{}"}}}).ok());
          REQUIRE(c->AppendToolResult({"d1", std::string(500, 'z'), false}).ok());
          REQUIRE(c->AppendToolResult({"d2", "short", true}).ok());
        }
        std::string result_id, pinned_id;  // the results of c0 (masked) and c1 (pinned)
        for (const Segment& s : c->Segments()) {
          if (s.tool_call_id == "c0") result_id = s.id;
          if (s.tool_call_id == "c1") pinned_id = s.id;
        }
        REQUIRE_FALSE(result_id.empty());
        if (all || step == "pin") REQUIRE(c->SetPinned(pinned_id, true).ok());
        if (all || step == "document update")
          REQUIRE(c->PutDocument(Layer::kDocs, Document{"guide", "Guide two.", "v2", 0}).ok());
        if (all || step == "document removal") REQUIRE(c->RemoveDocument(Layer::kDocs, "notes").ok());
        if (all || step == "document added")
          REQUIRE(c->PutDocument(Layer::kIndex, Document{"map", "Map.", "v1", 0}).ok());
        if (all || step == "system prompt") REQUIRE(c->SetSystemPrompts({"new", "prompts"}).ok());
        if (all || step == "mask") {
          HistoryEdit edit;
          edit.edits.push_back({result_id, SegmentEdit::Action::kMask, "[masked]"});
          REQUIRE(c->ApplyEdit(edit, "test@1", "test").ok());
        }
      }
      REQUIRE(Describe(a->Snapshot()) == Describe(b->Snapshot()));
      REQUIRE(Describe(a->Snapshot()) != Describe(at_mark));  // the step changed something

      REQUIRE(a->RewindToMark().ok());
      REQUIRE(b->Rewind(at_mark).ok());
      CHECK(Describe(a->Snapshot()) == Describe(at_mark));
      CHECK(Describe(a->Snapshot()) == Describe(b->Snapshot()));
      CHECK(MustPreview(*a).body == body_at_mark);
      CHECK(MustPreview(*b).body == body_at_mark);
      CHECK(Describe(marked_journal.changes.back()) == Describe(snapshot_journal.changes.back()));
      // The rewind dropped the mark.
      CHECK(a->RewindToMark().code() == StatusCode::kFailedPrecondition);
    }
  }
}

TEST_CASE("HasMark and ChangedSinceMark say whether a mark is set and what changed since",
          "[core][context][rewind]") {
  auto context = NewContext(ContextOptions{});
  CHECK_FALSE(context->HasMark());
  CHECK_FALSE(context->ChangedSinceMark());
  REQUIRE(context->AppendUser("first").ok());
  context->Mark();
  CHECK(context->HasMark());
  CHECK_FALSE(context->ChangedSinceMark());
  REQUIRE(context->AppendAssistant({"one", "", {}}).ok());
  CHECK(context->ChangedSinceMark());
  REQUIRE(context->RewindToMark().ok());
  CHECK_FALSE(context->HasMark());
  CHECK_FALSE(context->ChangedSinceMark());
  context->Mark();
  REQUIRE(context->AppendAssistant({"two", "", {}}).ok());
  context->ClearMark();
  CHECK_FALSE(context->HasMark());
  CHECK_FALSE(context->ChangedSinceMark());
}

TEST_CASE("a mark is dropped by ClearMark and Rewind, moved by Mark, and kept when a rewind fails",
          "[core][context][rewind]") {
  RecordingJournal journal;
  ContextOptions options;
  options.journal = &journal;
  auto context = NewContext(options);
  Status none = context->RewindToMark();
  CHECK(none.code() == StatusCode::kFailedPrecondition);
  CHECK(none.message().find("call Mark() first") != std::string::npos);

  REQUIRE(context->AppendUser("first").ok());
  context->Mark();
  REQUIRE(context->AppendAssistant({"one", "", {}}).ok());
  context->ClearMark();
  CHECK(context->RewindToMark().code() == StatusCode::kFailedPrecondition);
  CHECK(context->Stats().turns == 1);  // ClearMark keeps what changed

  context->Mark();  // moved: the reply above stays
  const std::string marked = MustPreview(*context).body;
  REQUIRE(context->AppendUser("second").ok());
  REQUIRE(context->AppendAssistant({"two", "", {}}).ok());
  const std::string after = MustPreview(*context).body;
  journal.fail = true;
  CHECK(context->RewindToMark().code() == StatusCode::kUnavailable);
  CHECK(MustPreview(*context).body == after);  // nothing changed, and the mark stays
  journal.fail = false;
  REQUIRE(context->RewindToMark().ok());
  CHECK(MustPreview(*context).body == marked);
  CHECK(context->Stats().turns == 1);

  context->Mark();
  const ContextSnapshot snapshot = context->Snapshot();
  REQUIRE(context->AppendUser("third").ok());
  REQUIRE(context->Rewind(snapshot).ok());
  CHECK(context->RewindToMark().code() == StatusCode::kFailedPrecondition);

  // A rewind to a mark nothing changed since succeeds, records nothing and drops the mark too.
  context->Mark();
  const size_t journaled = journal.changes.size();
  REQUIRE(context->RewindToMark().ok());
  CHECK(journal.changes.size() == journaled);
  CHECK(context->RewindToMark().code() == StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace strata
