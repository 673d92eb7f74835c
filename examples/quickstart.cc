// Quickstart: build an agent's context, render requests turn by turn, and see the prefix stay stable.
//
//   build/examples/example_quickstart
#include <iostream>
#include <string>

#include "strata/context.h"

namespace {

strata::Status Run() {
  strata::ContextOptions options;
  options.agent.id = "quickstart";
  options.agent.tenant = "acme";
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<strata::Context> context, strata::Context::Create(options));

  // Stable layers first: they form the cached prefix of every request.
  STRATA_RETURN_IF_ERROR(context->SetSystemPrompt("You are a careful coding agent."));
  STRATA_RETURN_IF_ERROR(context->SetTools(R"([{"type": "function", "function": {
      "name": "bash", "description": "Run a shell command",
      "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                     "required": ["command"]}}}])"));
  STRATA_RETURN_IF_ERROR(
      context->AddDocument(strata::Layer::kDocs, {"CONTRIBUTING.md", "Run tests with pytest -q.", "v3", 0})
          .status());

  // Per-request data goes to the volatile layer, never into the stable prefix.
  STRATA_RETURN_IF_ERROR(context->SetVolatile("current_time", "2026-11-29T18:30:00Z"));
  STRATA_RETURN_IF_ERROR(context->AppendUser("The test suite fails on main; find out why.").status());
  STRATA_ASSIGN_OR_RETURN(strata::BuiltRequest first, context->Build());

  // The model answers with a tool call; its arguments string is kept byte for byte.
  STRATA_RETURN_IF_ERROR(context->AppendAssistant({"Let me run the tests.", "",
                                                   {{"call_1", "bash", R"({"command": "pytest -q"})"}}})
                             .status());
  std::string log = "Traceback (most recent call last):\n";
  for (int i = 0; i < 6; ++i) log += "  File \"src/app.py\", line " + std::to_string(10 * i) + ", in f\n    g()\n";
  log += "KeyError: 'config'\n";
  STRATA_ASSIGN_OR_RETURN(std::string result_id, context->AppendToolResult({"call_1", log, false}));
  STRATA_RETURN_IF_ERROR(context->SetVolatile("current_time", "2026-11-29T18:30:09Z"));
  STRATA_ASSIGN_OR_RETURN(strata::BuiltRequest second, context->Build());

  // The second request starts with the first one's bytes up to the end of its history.
  const bool prefix_kept =
      second.body.compare(0, first.history_end_bytes, first.body, 0, first.history_end_bytes) == 0;
  std::cout << "first request:  " << first.body.size() << " bytes, stable prefix "
            << first.stable_prefix_bytes << " bytes (hash " << first.stable_prefix_hash.substr(0, 12)
            << ")\n"
            << "second request: " << second.body.size() << " bytes; first request's history is its prefix: "
            << (prefix_kept ? "yes" : "no") << "\n";

  // Append-time hygiene folded the stack trace; the original stays recallable.
  const strata::Segment* result = context->Find(result_id);
  std::cout << "tool result: " << strata::SegmentKindName(result->kind) << ", "
            << strata::HygieneActionName(result->hygiene) << ", recall id " << result->recall_id << "\n"
            << result->content << "\n";
  STRATA_ASSIGN_OR_RETURN(std::string original, context->Recall(result->recall_id));
  std::cout << "original: " << original.size() << " bytes; rendered: " << result->content.size()
            << " bytes\n";
  return strata::Status::Ok();
}

}  // namespace

int main() {
  strata::Status status = Run();
  if (!status.ok()) {
    std::cerr << status << "\n";
    return 1;
  }
  return 0;
}
