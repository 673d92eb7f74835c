// strata/replay/trace.h — agent trajectories in the replay format and replaying them through a
// Context (component strata::replay, the tooling beside the API: `strata replay`, the benchmarks
// and the tests read trajectories with it).
//
// A trajectory is a JSON-lines file, one OpenAI chat message per line:
//   {"role": "system"|"user"|"assistant"|"tool", "content": "...", "tool_calls": [...],
//    "tool_call_id": "...", "name": "..."}
//
//   auto trace = strata::ReadTrace("run.jsonl");            // StatusOr<std::vector<TraceMessage>>
//   STRATA_RETURN_IF_ERROR(strata::ReplayTrace(*trace, *context,
//       [](const strata::TraceMessage& next, const strata::BuiltRequest& request) {
//         std::cout << request.body.size() << "\n";            // the request before `next`
//         return strata::Status::Ok();
//       }));
//
// Thread safety: free functions; ReplayTrace uses the context from the calling thread only.
#ifndef STRATA_REPLAY_TRACE_H_
#define STRATA_REPLAY_TRACE_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/context.h"
#include "strata/segment.h"
#include "strata/status.h"

namespace strata {

// The role of a trace message.
enum class TraceRole { kSystem, kUser, kAssistant, kTool };

// One message of a trajectory file (a line of OpenAI chat JSON).
struct TraceMessage {
  TraceRole role = TraceRole::kUser;  // the message's role
  std::string content;  // the message text
  std::string reasoning;             // "reasoning_content" or "reasoning", if present
  std::vector<ToolCall> tool_calls;  // assistant
  std::string tool_call_id;          // tool
  std::string name;                  // tool: the tool's name, if given
  size_t line = 0;                   // 1-based line number in the file
};

// Parses one trajectory line. INVALID_ARGUMENT saying what is wrong (malformed JSON, unknown role,
// non-string content, malformed tool_calls, invalid UTF-8).
StatusOr<TraceMessage> ParseTraceLine(std::string_view line);

// Reads a whole trajectory file: one JSON message per line (ParseTraceLine; a string may hold any
// JSON escape, the escape of U+0000 too), lines ending in LF or CRLF, a UTF-8 byte order mark at
// the start skipped, blank lines skipped. Errors name the file and the line:
// `run.jsonl:17: unknown role "robot" (expected system, user, assistant or tool)`. NOT_FOUND when
// the file does not exist; INVALID_ARGUMENT for a path that is not a regular file (a FIFO or a
// device: refused before anything is read, never waited on) and for a file without any message
// (empty or only whitespace).
StatusOr<std::vector<TraceMessage>> ReadTrace(const std::string& path);

// The agent id replay gives a trace: the file name without directories and without ".jsonl".
std::string TraceAgentId(std::string_view path);

// Called before each assistant message with the request the context renders at that point.
using TraceTurnCallback =
    std::function<Status(const TraceMessage& next_assistant, const BuiltRequest& request)>;

// Feeds `messages` into `context` in order: leading system messages become the system prompt(s);
// before each assistant message the context is built and `on_turn` called; then the message is
// appended. The request's body is then handed back to the context unchanged (Context::Recycle with
// its render serial), so the next build writes only what changed. A failure names the message's
// line. System messages after the conversation started are refused (strata keeps system prompts
// in the stable layer).
Status ReplayTrace(const std::vector<TraceMessage>& messages, Context& context,
                   const TraceTurnCallback& on_turn, const BuildOptions& build_options = {});

}  // namespace strata

#endif  // STRATA_REPLAY_TRACE_H_
