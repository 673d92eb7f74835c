#include "strata/replay/trace.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/text_util.h"

namespace strata {
namespace {

StatusOr<std::string> StringField(const nlohmann::json& object, const char* key, bool allow_null) {
  auto it = object.find(key);
  if (it == object.end() || (allow_null && it->is_null())) return std::string();
  if (!it->is_string()) {
    return InvalidArgumentError(std::string("\"") + key + "\" must be a string, got " + it->type_name());
  }
  return it->get<std::string>();
}

// The whole of the file at `path`, which must be a regular file: it is opened without blocking and
// checked before it is read, so that a FIFO (which would block until a writer comes) or a device
// such as /dev/zero (which never ends) is refused instead.
StatusOr<std::string> ReadRegularFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    const std::string why = std::strerror(error);
    if (error == ENOENT) return NotFoundError("cannot open trace \"" + path + "\": " + why);
    return UnavailableError("cannot open trace \"" + path + "\": " + why);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgumentError("trace \"" + path +
                                "\" is not a regular file (a FIFO, a device or a directory): "
                                "give the path of a trajectory file");
  }
  std::string text;
  text.reserve(static_cast<size_t>(st.st_size));
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      return DataLossError("reading trace \"" + path + "\" failed: " + why);
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

}  // namespace

StatusOr<TraceMessage> ParseTraceLine(std::string_view line) {
  STRATA_RETURN_IF_ERROR(internal::ValidateUtf8(line, "the line"));
  nlohmann::json j = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
  if (j.is_discarded()) return InvalidArgumentError("malformed JSON; each line must be one JSON object");
  if (!j.is_object()) return InvalidArgumentError(std::string("expected a JSON object, got ") + j.type_name());
  TraceMessage m;
  STRATA_ASSIGN_OR_RETURN(std::string role, StringField(j, "role", false));
  if (role == "system") m.role = TraceRole::kSystem;
  else if (role == "user") m.role = TraceRole::kUser;
  else if (role == "assistant") m.role = TraceRole::kAssistant;
  else if (role == "tool") m.role = TraceRole::kTool;
  else {
    return InvalidArgumentError("unknown role \"" + role +
                                "\" (expected system, user, assistant or tool)");
  }
  STRATA_ASSIGN_OR_RETURN(m.content, StringField(j, "content", true));
  STRATA_ASSIGN_OR_RETURN(m.reasoning, StringField(j, "reasoning_content", true));
  if (m.reasoning.empty()) {
    STRATA_ASSIGN_OR_RETURN(m.reasoning, StringField(j, "reasoning", true));
  }
  STRATA_ASSIGN_OR_RETURN(m.tool_call_id, StringField(j, "tool_call_id", true));
  STRATA_ASSIGN_OR_RETURN(m.name, StringField(j, "name", true));
  if (m.role == TraceRole::kTool && m.tool_call_id.empty()) {
    return InvalidArgumentError("tool message without \"tool_call_id\"");
  }
  auto calls = j.find("tool_calls");
  if (calls != j.end() && !calls->is_null()) {
    if (!calls->is_array()) return InvalidArgumentError("\"tool_calls\" must be an array");
    for (size_t i = 0; i < calls->size(); ++i) {
      const nlohmann::json& c = (*calls)[i];
      const std::string where = "tool_calls[" + std::to_string(i) + "]";
      if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) {
        return InvalidArgumentError(where + " must be an object with a \"function\" object");
      }
      ToolCall call;
      auto id = StringField(c, "id", false);
      auto name = StringField(c["function"], "name", false);
      auto arguments = StringField(c["function"], "arguments", true);
      if (!id.ok()) return InvalidArgumentError(where + ": " + id.status().message());
      if (!name.ok()) return InvalidArgumentError(where + ".function: " + name.status().message());
      if (!arguments.ok()) {
        return InvalidArgumentError(where + ".function: " + arguments.status().message() +
                                    " (arguments are kept as the exact string the server produced)");
      }
      call.id = *id;
      call.name = *name;
      call.arguments = *arguments;
      m.tool_calls.push_back(std::move(call));
    }
    if (!m.tool_calls.empty() && m.role != TraceRole::kAssistant) {
      return InvalidArgumentError("only assistant messages may carry \"tool_calls\"");
    }
  }
  return m;
}

StatusOr<std::vector<TraceMessage>> ReadTrace(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string text, ReadRegularFile(path));
  constexpr std::string_view kBom = "\xEF\xBB\xBF";  // a UTF-8 byte order mark opens some files
  size_t pos = text.compare(0, kBom.size(), kBom) == 0 ? kBom.size() : 0;
  std::vector<TraceMessage> messages;
  for (size_t number = 1; pos < text.size(); ++number) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF line ends
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    StatusOr<TraceMessage> message = ParseTraceLine(line);
    if (!message.ok()) {
      return Status(message.status().code(),
                    path + ":" + std::to_string(number) + ": " + message.status().message());
    }
    message->line = number;
    messages.push_back(std::move(message).value());
  }
  if (messages.empty()) {
    return InvalidArgumentError("trace \"" + path +
                                "\" has no messages: the file is empty or holds only whitespace "
                                "(a trace is one JSON chat message per line)");
  }
  return messages;
}

std::string TraceAgentId(std::string_view path) {
  size_t slash = path.find_last_of('/');
  std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  constexpr std::string_view kSuffix = ".jsonl";
  if (name.size() > kSuffix.size() && name.substr(name.size() - kSuffix.size()) == kSuffix) {
    name.remove_suffix(kSuffix.size());
  }
  return std::string(name);
}

Status ReplayTrace(const std::vector<TraceMessage>& messages, Context& context,
                   const TraceTurnCallback& on_turn, const BuildOptions& build_options) {
  std::vector<std::string> system_prompts;
  bool conversation_started = false;
  auto at = [](const TraceMessage& m, const Status& s) {
    return Status(s.code(), "line " + std::to_string(m.line) + ": " + s.message());
  };
  for (const TraceMessage& m : messages) {
    if (m.role == TraceRole::kSystem) {
      if (conversation_started) {
        return at(m, InvalidArgumentError(
                         "system message after the conversation started; strata keeps system "
                         "prompts in the stable system layer — move it to the start of the trace"));
      }
      system_prompts.push_back(m.content);
      continue;
    }
    if (!conversation_started) {
      conversation_started = true;
      if (!system_prompts.empty()) {
        Status s = context.SetSystemPrompts(system_prompts);
        if (!s.ok()) return at(m, s);
      }
    }
    Status s;
    switch (m.role) {
      case TraceRole::kUser:
        s = context.AppendUser(m.content).status();
        break;
      case TraceRole::kAssistant: {
        StatusOr<BuiltRequest> request = context.Build(build_options);
        if (!request.ok()) return at(m, request.status());
        if (on_turn) {
          Status callback = on_turn(m, *request);
          if (!callback.ok()) return at(m, callback);
        }
        // Handed back unchanged (the callback sees it const): the next build writes what it adds.
        context.Recycle(std::move(request->body), request->render_serial);
        s = context.AppendAssistant(AssistantMessage{m.content, m.reasoning, m.tool_calls}).status();
        break;
      }
      case TraceRole::kTool:
        s = context.AppendToolResult(ToolResult{m.tool_call_id, m.content, false}).status();
        break;
      case TraceRole::kSystem:
        break;
    }
    if (!s.ok()) return at(m, s);
  }
  if (!conversation_started && !system_prompts.empty()) {
    STRATA_RETURN_IF_ERROR(context.SetSystemPrompts(system_prompts));
  }
  return Status::Ok();
}

}  // namespace strata
