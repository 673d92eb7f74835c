// Trace reader and replay: one input is a trace file (JSON lines). Every line goes through
// ParseTraceLine, as ReadTrace does; the accepted messages are replayed into a context, as
// `strata replay` does. A refused line must say why; every request rendered must be valid JSON.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "strata/context.h"
#include "strata/replay/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<strata::TraceMessage> messages;
  size_t number = 0;
  for (std::string_view line : strata::fuzz::Split(strata::fuzz::AsText(data, size), "\n")) {
    ++number;
    if (line.empty()) continue;
    auto message = strata::ParseTraceLine(line);
    if (!message.ok()) {
      STRATA_FUZZ_CHECK(!message.status().message().empty(), "a refused trace line without a reason");
      continue;
    }
    STRATA_FUZZ_CHECK(message->role != strata::TraceRole::kTool || !message->tool_call_id.empty(),
                      "a tool message accepted without tool_call_id");
    message->line = number;
    messages.push_back(std::move(message).value());
  }
  strata::ContextOptions options;
  options.agent.id = "fuzz";
  auto context = strata::Context::Create(options);
  STRATA_FUZZ_CHECK(context.ok(), "Context::Create failed");
  strata::Status replayed = strata::ReplayTrace(
      messages, **context, [](const strata::TraceMessage&, const strata::BuiltRequest& request) {
        STRATA_FUZZ_CHECK(nlohmann::json::accept(request.body), "a rendered request is not valid JSON");
        return strata::Status::Ok();
      });
  STRATA_FUZZ_CHECK(replayed.ok() || !replayed.message().empty(), "a refused replay without a reason");
  return 0;
}
