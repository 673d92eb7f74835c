#include "core/hygiene.h"
#include "core/text_util.h"

#include <catch2/catch.hpp>

#include "testing/context_testing.h"

namespace strata {
namespace {

using testing::NewContext;

std::string Lines(const std::string& prefix, int count) {
  std::string out;
  for (int i = 0; i < count; ++i) out += prefix + std::to_string(i) + "\n";
  return out;
}

// Appends an assistant call and returns its id.
std::string Call(Context& context, const std::string& id, const std::string& arguments) {
  REQUIRE(context.AppendAssistant({"", "", {{id, "bash", arguments}}}).ok());
  return id;
}

TEST_CASE("oversized tool outputs keep head and tail with a marker naming the recall id",
          "[core][hygiene]") {
  ContextOptions options;
  options.hygiene.max_segment_tokens = 200;  // 800 bytes with the 4-byte estimator
  auto context = NewContext(options);
  REQUIRE(context->AppendUser("go").ok());
  const std::string output = Lines("line ", 1000);
  Call(*context, "c1", R"({"command":"cat big.log"})");
  auto id = context->AppendToolResult({"c1", output, false});
  REQUIRE(id.ok());
  const Segment* s = context->Find(*id);
  REQUIRE(s != nullptr);
  CHECK(s->hygiene == HygieneAction::kTruncated);
  CHECK(s->tokens <= 200);
  CHECK_THAT(s->content, Catch::StartsWith("line 0\nline 1\n"));
  CHECK_THAT(s->content, Catch::EndsWith("line 998\nline 999\n"));
  CHECK_THAT(s->content, Catch::Contains("[strata: cut ") && Catch::Contains(s->recall_id));
  auto original = context->Recall(s->recall_id);
  REQUIRE(original.ok());
  CHECK(*original == output);
  CHECK(context->Stats().truncated == 1);
}

TEST_CASE("truncation can be turned off", "[core][hygiene]") {
  ContextOptions options;
  options.hygiene.max_segment_tokens = 0;
  auto context = NewContext(options);
  REQUIRE(context->AppendUser("go").ok());
  const std::string output = Lines("line ", 5000);
  Call(*context, "c1", "{}");
  auto id = context->AppendToolResult({"c1", output, false});
  REQUIRE(id.ok());
  CHECK(context->Find(*id)->content == output);
  CHECK(context->Find(*id)->recall_id.empty());
}

TEST_CASE("an identical output of the same call becomes a reference to the earlier call",
          "[core][hygiene]") {
  auto context = NewContext();
  REQUIRE(context->AppendUser("go").ok());
  const std::string output = Lines("file_", 100);
  Call(*context, "c1", R"({"command":"ls"})");
  REQUIRE(context->AppendToolResult({"c1", output, false}).ok());
  // Same arguments, same output: deduplicated.
  Call(*context, "c2", R"({"command":"ls"})");
  auto second = context->AppendToolResult({"c2", output, false});
  REQUIRE(second.ok());
  const Segment* s = context->Find(*second);
  CHECK(s->hygiene == HygieneAction::kDeduplicated);
  CHECK(s->duplicate_of == "c1");
  CHECK_THAT(s->content, Catch::Contains("call c1"));
  CHECK(*context->Recall(s->recall_id) == output);
  // Different arguments, same output: kept verbatim.
  Call(*context, "c3", R"({"command":"ls -1"})");
  auto third = context->AppendToolResult({"c3", output, false});
  CHECK(context->Find(*third)->content == output);
  CHECK(context->Stats().deduplicated == 1);
}

TEST_CASE("deduplication can be turned off", "[core][hygiene]") {
  ContextOptions options;
  options.hygiene.deduplicate = false;
  auto context = NewContext(options);
  REQUIRE(context->AppendUser("go").ok());
  const std::string output = Lines("file_", 100);
  Call(*context, "c1", "{}");
  REQUIRE(context->AppendToolResult({"c1", output, false}).ok());
  Call(*context, "c2", "{}");
  auto second = context->AppendToolResult({"c2", output, false});
  CHECK(context->Find(*second)->content == output);
}

const char kTraceback[] =
    "Running tests\n"
    "Traceback (most recent call last):\n"
    "  File \"/repo/run.py\", line 10, in <module>\n"
    "    main()\n"
    "  File \"/repo/run.py\", line 7, in main\n"
    "    helper()\n"
    "  File \"/repo/lib.py\", line 30, in helper\n"
    "    inner()\n"
    "  File \"/repo/lib.py\", line 40, in inner\n"
    "    deeper()\n"
    "  File \"/repo/lib.py\", line 50, in deeper\n"
    "    raise ValueError(\"bad value 42\")\n"
    "ValueError: bad value 42\n";

TEST_CASE("error logs fold repeated lines and keep first and last stack frames", "[core][hygiene]") {
  auto context = NewContext();
  REQUIRE(context->AppendUser("go").ok());
  std::string log = kTraceback;
  for (int i = 0; i < 20; ++i) log += "WARNING: deprecated call\n";
  log += "done";
  Call(*context, "c1", R"({"command":"python run.py"})");
  auto id = context->AppendToolResult({"c1", log, false});
  REQUIRE(id.ok());
  const Segment* s = context->Find(*id);
  CHECK(s->kind == SegmentKind::kErrorLog);
  CHECK(s->hygiene == HygieneAction::kFolded);
  const std::string& folded = s->content;
  CHECK_THAT(folded, Catch::Contains("File \"/repo/run.py\", line 10, in <module>"));
  CHECK_THAT(folded, Catch::Contains("File \"/repo/lib.py\", line 50, in deeper"));
  CHECK_THAT(folded, !Catch::Contains("line 30, in helper"));
  CHECK_THAT(folded, Catch::Contains("[strata: 3 frames omitted (/repo/run.py:main, /repo/lib.py:helper, "
                                     "/repo/lib.py:inner); recall id " + s->recall_id + "]"));
  CHECK_THAT(folded, Catch::Contains("ValueError: bad value 42"));
  CHECK_THAT(folded, Catch::Contains("WARNING: deprecated call\n[strata: previous line repeated 19 more times]\ndone"));
  CHECK(*context->Recall(s->recall_id) == log);
}

TEST_CASE("folding can be turned off and leaves non-error output alone", "[core][hygiene]") {
  ContextOptions options;
  options.hygiene.fold_error_logs = false;
  auto off = NewContext(options);
  REQUIRE(off->AppendUser("go").ok());
  std::string log = std::string(kTraceback) + Lines("x", 10);
  Call(*off, "c1", "{}");
  auto id = off->AppendToolResult({"c1", log, false});
  CHECK(off->Find(*id)->content == log);
  CHECK(off->Find(*id)->kind == SegmentKind::kErrorLog);

  auto on = NewContext();
  REQUIRE(on->AppendUser("go").ok());
  std::string repeated;
  for (int i = 0; i < 50; ++i) repeated += "same line\n";
  Call(*on, "c1", "{}");
  auto plain = on->AppendToolResult({"c1", repeated, false});
  CHECK(on->Find(*plain)->kind == SegmentKind::kToolResult);
  CHECK(on->Find(*plain)->content == repeated);
}

TEST_CASE("KeepHeadAndTail cuts on line and UTF-8 boundaries", "[core][hygiene]") {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "é日本語 line " + std::to_string(i) + "\n";
  std::string cut = internal::KeepHeadAndTail(text, 300, 300, 4.0, "r-1");
  CHECK(cut.size() < text.size());
  CHECK(internal::ValidateUtf8(cut, "cut").ok());
  CHECK_THAT(cut, Catch::StartsWith("é日本語 line 0\n"));
  CHECK_THAT(cut, Catch::EndsWith("é日本語 line 199\n"));
  const size_t marker = cut.find("[strata: cut ");
  REQUIRE(marker != std::string::npos);
  CHECK(cut[marker - 1] == '\n');
}

}  // namespace
}  // namespace strata
