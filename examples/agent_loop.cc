// An agent loop under a token budget: strata compacts the history when it must, keeps the request
// prefix stable in between, and lets the model get back what was compacted through the
// `context_recall` tool.
//
// The "model" here is scripted (no server needed): it reads files for a while, then asks to
// recall one whose output was masked. Run it:
//
//   build/examples/example_agent_loop
#include <iostream>
#include <memory>
#include <string>

#include "strata/compact.h"
#include "strata/context.h"

namespace {

// A stand-in for a tool: a source file of `lines` lines.
std::string ReadFile(int n, int lines) {
  std::string text = "# module_" + std::to_string(n) + ".py\n";
  for (int i = 0; i < lines; ++i) {
    text += "def handler_" + std::to_string(n) + "_" + std::to_string(i) + "(request):\n    return route(request)\n";
  }
  return text;
}

strata::Status Run() {
  // 1. A budget: 6,000 input tokens. Compaction starts above 90% and brings the request down to 60%.
  strata::Budget budget;
  budget.window = 6000;
  budget.reserve_output = budget.reserve_reasoning = budget.reserve_headroom = 0;
  budget.trigger = strata::BudgetLimit::Fraction(0.9);
  budget.target = strata::BudgetLimit::Fraction(0.6);

  // 2. The strata policy; tool results of "read_spec" are never touched.
  strata::StrataPolicyOptions policy_options;
  policy_options.exclude_tools = {"read_spec"};
  std::unique_ptr<strata::CompactionPolicy> policy = strata::MakeStrataPolicy(policy_options);

  strata::ContextOptions options;
  options.agent.id = "agent-loop";
  options.budget = budget;
  options.compaction = policy.get();
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<strata::Context> context, strata::Context::Create(options));
  STRATA_RETURN_IF_ERROR(context->SetSystemPrompt("You are a coding agent. Use the tools."));
  // 3. Expose context_recall next to the application's own tools.
  STRATA_RETURN_IF_ERROR(context->SetTools(
      "[" + strata::RecallToolSchema() +
      R"(,{"type":"function","function":{"name":"read_file","parameters":{"type":"object",
          "properties":{"path":{"type":"string"}}}}}])"));
  STRATA_RETURN_IF_ERROR(context->AppendUser("Find where requests are routed.").status());

  for (int turn = 1; turn <= 14; ++turn) {
    // Build before every model call: compacts first when the budget requires.
    STRATA_ASSIGN_OR_RETURN(strata::BuiltRequest request, context->Build());
    std::cout << "turn " << turn << ": " << request.input_tokens << " tokens";
    if (request.compaction) {
      const strata::CompactionReport& c = *request.compaction;
      std::cout << "  [compacted by " << c.policy << ": " << c.tokens_before << " -> " << c.tokens_after
                << " tokens, " << c.masked << " masked, " << c.summarized << " summarized, "
                << c.invalidated_tokens << " cached tokens invalidated]";
    }
    std::cout << "\n";

    // The scripted model: read a file per turn.
    const std::string id = "call_" + std::to_string(turn);
    STRATA_RETURN_IF_ERROR(context->AppendAssistant({"Reading the next module.", "",
                                                     {{id, "read_file", "{\"path\":\"module_" + std::to_string(turn) + ".py\"}"}}})
                               .status());
    STRATA_RETURN_IF_ERROR(context->AppendToolResult({id, ReadFile(turn, 40), false}).status());
  }

  // 4. Compaction masked some results (the latest ones that reach the target, so that the cached
  //    prefix before them survives). A placeholder names the recall id.
  std::string recall_id;
  for (const strata::Segment& s : context->Segments()) {
    if (s.state == strata::SegmentState::kMasked) {
      std::cout << "\na masked result now reads:\n  " << s.content << "\n";
      recall_id = s.recall_id;
      break;
    }
  }
  if (recall_id.empty()) return strata::InternalError("expected a masked result");

  // 5. The model asks for it back: the original is appended as a new tool result (the prefix stays).
  STRATA_RETURN_IF_ERROR(context->AppendAssistant({"I need that module again.", "",
                                                   {{"recall_1", strata::kRecallToolName,
                                                     "{\"recall_id\":\"" + recall_id + "\"}"}}})
                             .status());
  STRATA_ASSIGN_OR_RETURN(std::string recalled, context->AnswerRecall("recall_1"));
  std::cout << "recalled " << context->Find(recalled)->content.size() << " bytes under " << recall_id << "\n";
  STRATA_ASSIGN_OR_RETURN(strata::BuiltRequest last, context->Build());
  std::cout << "final request: " << last.input_tokens << " tokens (limit " << last.limit_tokens << "), "
            << context->Compactions().size() << " compactions in all\n";
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
