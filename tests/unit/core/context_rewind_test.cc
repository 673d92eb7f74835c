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

}  // namespace
}  // namespace strata
