// Chat templates. The GLM-5 family template is a hand translation of the public GLM-4.7 style
// chat_template.jinja (zai-org, Hugging Face), rendered the way transformers does it
// (trim_blocks + lstrip_blocks; `tojson` = Python json.dumps(ensure_ascii=False), separators ", "
// and
// ": ") after vLLM's request preprocessing (tool-call "arguments" strings parsed into objects, null
// content rendered as ""). docs/tokenizers.md lists the covered cases.
#include "strata/chat_template.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

namespace strata {
namespace {

using ojson = nlohmann::ordered_json;

// Python json.dumps(value, ensure_ascii=False) with its default separators.
void PyJson(const ojson& v, std::string* out) {
  switch (v.type()) {
    case ojson::value_t::object: {
      out->push_back('{');
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out->append(", ");
        first = false;
        PyJson(ojson(it.key()), out);
        out->append(": ");
        PyJson(it.value(), out);
      }
      out->push_back('}');
      return;
    }
    case ojson::value_t::array: {
      out->push_back('[');
      bool first = true;
      for (const auto& e : v) {
        if (!first) out->append(", ");
        first = false;
        PyJson(e, out);
      }
      out->push_back(']');
      return;
    }
    case ojson::value_t::string: {
      const std::string& s = v.get_ref<const std::string&>();
      out->push_back('"');
      for (char c : s) {
        switch (c) {
          case '"':
            out->append("\\\"");
            break;
          case '\\':
            out->append("\\\\");
            break;
          case '\n':
            out->append("\\n");
            break;
          case '\r':
            out->append("\\r");
            break;
          case '\t':
            out->append("\\t");
            break;
          case '\b':
            out->append("\\b");
            break;
          case '\f':
            out->append("\\f");
            break;
          default:
            if (static_cast<unsigned char>(c) < 0x20) {
              char buf[8];
              std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(c));
              out->append(buf);
            } else {
              out->push_back(c);
            }
        }
      }
      out->push_back('"');
      return;
    }
    case ojson::value_t::boolean:
      out->append(v.get<bool>() ? "true" : "false");
      return;
    case ojson::value_t::null:
      out->append("null");
      return;
    default:
      out->append(v.dump());
      return;  // numbers: shortest round-trip, like Python's repr
  }
}

std::string PyJson(const ojson& v) {
  std::string out;
  PyJson(v, &out);
  return out;
}

// Python str.isspace for the characters that occur in practice (ASCII whitespace and separators).
bool IsPySpace(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f');
}

std::string Strip(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && IsPySpace(s[b])) ++b;
  while (e > b && IsPySpace(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

std::string_view RStripChar(std::string_view s, char c) {
  while (!s.empty() && s.back() == c) s.remove_suffix(1);
  return s;
}

std::string_view LStripChar(std::string_view s, char c) {
  while (!s.empty() && s.front() == c) s.remove_prefix(1);
  return s;
}

// The template's visible_text macro: a string, or the text parts of a content array; null is "".
std::string VisibleText(const ojson& content) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return "";
  std::string out;
  if (content.is_array()) {
    for (const auto& item : content) {
      if (item.is_object() && item.value("type", "") == "text" && item.contains("text") &&
          item["text"].is_string())
        out += item["text"].get<std::string>();
      else if (item.is_string())
        out += item.get<std::string>();
    }
    return out;
  }
  return PyJson(content);
}

struct ParsedRequest {
  ojson messages;
  ojson tools;
  std::string reasoning_effort;
  std::optional<bool> enable_thinking;
  std::optional<bool> clear_thinking;
};

StatusOr<ParsedRequest> Parse(std::string_view request_json) {
  ojson body = ojson::parse(request_json.begin(), request_json.end(), nullptr, false);
  if (body.is_discarded() || !body.is_object())
    return InvalidArgumentError("chat template: the request body is not a JSON object");
  if (!body.contains("messages") || !body["messages"].is_array())
    return InvalidArgumentError("chat template: the request body has no \"messages\" array");
  ParsedRequest r;
  r.messages = body["messages"];
  if (body.contains("tools") && body["tools"].is_array()) r.tools = body["tools"];
  if (body.contains("reasoning_effort") && body["reasoning_effort"].is_string())
    r.reasoning_effort = body["reasoning_effort"].get<std::string>();
  if (body.contains("chat_template_kwargs") && body["chat_template_kwargs"].is_object()) {
    const ojson& kw = body["chat_template_kwargs"];
    if (kw.contains("enable_thinking") && kw["enable_thinking"].is_boolean())
      r.enable_thinking = kw["enable_thinking"].get<bool>();
    if (kw.contains("clear_thinking") && kw["clear_thinking"].is_boolean())
      r.clear_thinking = kw["clear_thinking"].get<bool>();
  }
  for (size_t i = 0; i < r.messages.size(); ++i) {
    const ojson& m = r.messages[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      return InvalidArgumentError("chat template: messages[" + std::to_string(i) +
                                  "] has no \"role\"");
    std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" &&
        role != "tool")
      return InvalidArgumentError("chat template: messages[" + std::to_string(i) +
                                  "] has unknown role \"" + role +
                                  "\" (expected system, developer, user, assistant or tool)");
  }
  return r;
}

// A tool call's arguments as an object (vLLM parses the "arguments" string before templating).
StatusOr<ojson> ToolCallArguments(const ojson& function, size_t message_index) {
  if (!function.contains("arguments")) return ojson::object();
  const ojson& args = function["arguments"];
  if (args.is_object()) return args;
  if (args.is_string()) {
    const std::string& text = args.get_ref<const std::string&>();
    ojson parsed = ojson::parse(text, nullptr, false);
    if (!parsed.is_discarded() && parsed.is_object()) return parsed;
    return InvalidArgumentError(
        "chat template: messages[" + std::to_string(message_index) +
        "] has tool-call arguments that are not a JSON object: " + text.substr(0, 80));
  }
  return InvalidArgumentError("chat template: messages[" + std::to_string(message_index) +
                              "] has tool-call arguments that are neither a string nor an object");
}

class Glm5ChatTemplate final : public ChatTemplate {
 public:
  explicit Glm5ChatTemplate(Glm5TemplateOptions options) : options_(options) {}

  std::string Name() const override { return "glm5:1"; }

  StatusOr<size_t> OverheadTokens(std::string_view request_json) const override {
    STRATA_RETURN_IF_ERROR(Parse(request_json).status());
    return size_t{0};
  }

  StatusOr<std::string> Render(std::string_view request_json) const override {
    STRATA_ASSIGN_OR_RETURN(ParsedRequest r, Parse(request_json));
    std::string out = "[gMASK]<sop>";
    if (!r.tools.empty()) {
      out +=
          "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user "
          "query.\n\n"
          "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n";
      for (const auto& tool : r.tools) out += PyJson(tool) + "\n";
      out +=
          "</tools>\n\nFor each function call, output the function name and arguments within the "
          "following XML format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key>"
          "<arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</"
          "arg_key><arg_value>{arg-value-2}"
          "</arg_value>...</tool_call>";
    }
    if (options_.reasoning_effort_line && !r.reasoning_effort.empty())
      out += "<|system|>Reasoning Effort: " + r.reasoning_effort;

    int last_user_index = -1;
    for (size_t i = 0; i < r.messages.size(); ++i)
      if (r.messages[i]["role"] == "user") last_user_index = static_cast<int>(i);

    for (size_t i = 0; i < r.messages.size(); ++i) {
      const ojson& m = r.messages[i];
      const std::string role = m["role"].get<std::string>();
      const ojson content = m.contains("content") ? m["content"] : ojson();
      if (role == "user") {
        out += "<|user|>" + VisibleText(content);
      } else if (role == "system" || role == "developer") {
        out += "<|system|>" + VisibleText(content);
      } else if (role == "assistant") {
        out += "<|assistant|>";
        std::string text = VisibleText(content);
        std::string reasoning;
        const ojson* rc = nullptr;
        if (m.contains("reasoning_content") && m["reasoning_content"].is_string()) {
          rc = &m["reasoning_content"];
        } else if (m.contains("reasoning") && m["reasoning"].is_string()) {
          rc = &m["reasoning"];  // vLLM's response field name, replayed by agents
        }
        if (rc != nullptr) {
          reasoning = rc->get<std::string>();
        } else if (text.find("</think>") != std::string::npos) {
          std::string_view before = std::string_view(text).substr(0, text.find("</think>"));
          before = RStripChar(before, '\n');
          size_t open = before.rfind("<think>");
          if (open != std::string_view::npos) before = before.substr(open + 7);
          reasoning = std::string(LStripChar(before, '\n'));
          text = std::string(
              LStripChar(std::string_view(text).substr(text.rfind("</think>") + 8), '\n'));
        }
        bool keep = (r.clear_thinking.has_value() && !*r.clear_thinking) ||
                    static_cast<int>(i) > last_user_index;
        if (keep && !reasoning.empty()) {
          out += "<think>" + Strip(reasoning) + "</think>";
        } else {
          out += "</think>";
        }
        std::string stripped = Strip(text);
        if (!stripped.empty()) out += stripped;
        if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
          for (const auto& tc : m["tool_calls"]) {
            const ojson& fn =
                tc.contains("function") && tc["function"].is_object() ? tc["function"] : tc;
            out += "<tool_call>" + (fn.contains("name") && fn["name"].is_string()
                                        ? fn["name"].get<std::string>()
                                        : "");
            STRATA_ASSIGN_OR_RETURN(ojson args, ToolCallArguments(fn, i));
            for (auto it = args.begin(); it != args.end(); ++it) {
              out += "<arg_key>" + it.key() + "</arg_key><arg_value>";
              out += it.value().is_string() ? it.value().get<std::string>() : PyJson(it.value());
              out += "</arg_value>";
            }
            out += "</tool_call>";
          }
        }
      } else if (role == "tool") {
        if (content.is_string() || content.is_null()) {
          if (i == 0 || r.messages[i - 1]["role"] != "tool") out += "<|observation|>";
          out += "<tool_response>" + VisibleText(content) + "</tool_response>";
        } else {
          out += "<|observation|>";
          for (const auto& tr : content) {
            std::string text;
            if (tr.is_object() && tr.contains("output")) {
              text =
                  tr["output"].is_string() ? tr["output"].get<std::string>() : PyJson(tr["output"]);
            } else if (tr.is_object() && tr.contains("text") && tr["text"].is_string()) {
              text = tr["text"].get<std::string>();
            } else {
              text = tr.is_string() ? tr.get<std::string>() : PyJson(tr);
            }
            out += "\n<tool_response>" + text + "</tool_response>";
          }
        }
      }
    }
    if (options_.add_generation_prompt) {
      out += "<|assistant|>";
      out += (r.enable_thinking.has_value() && !*r.enable_thinking) ? "</think>" : "<think>";
    }
    return out;
  }

 private:
  Glm5TemplateOptions options_;
};

class GenericChatTemplate final : public ChatTemplate {
 public:
  explicit GenericChatTemplate(GenericTemplateOptions options) : options_(options) {}

  std::string Name() const override {
    return "generic:" + std::to_string(options_.per_message_tokens) + "/" +
           std::to_string(options_.per_request_tokens);
  }

  StatusOr<size_t> OverheadTokens(std::string_view request_json) const override {
    STRATA_ASSIGN_OR_RETURN(ParsedRequest r, Parse(request_json));
    return options_.per_message_tokens * r.messages.size() + options_.per_request_tokens;
  }

  StatusOr<std::string> Render(std::string_view request_json) const override {
    STRATA_ASSIGN_OR_RETURN(ParsedRequest r, Parse(request_json));
    std::string out;
    for (const auto& tool : r.tools) out += PyJson(tool) + "\n";
    for (const auto& m : r.messages) {
      out += m["role"].get<std::string>() + "\n" +
             VisibleText(m.contains("content") ? m["content"] : ojson());
      if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
        for (const auto& tc : m["tool_calls"]) {
          const ojson& fn =
              tc.contains("function") && tc["function"].is_object() ? tc["function"] : tc;
          out +=
              "\n" +
              (fn.contains("name") && fn["name"].is_string() ? fn["name"].get<std::string>() : "");
          if (fn.contains("arguments"))
            out += " " + (fn["arguments"].is_string() ? fn["arguments"].get<std::string>()
                                                      : PyJson(fn["arguments"]));
        }
      }
      out += "\n";
    }
    return out;
  }

 private:
  GenericTemplateOptions options_;
};

}  // namespace

std::unique_ptr<ChatTemplate> MakeGlm5ChatTemplate(Glm5TemplateOptions options) {
  return std::make_unique<Glm5ChatTemplate>(options);
}

std::unique_ptr<ChatTemplate> MakeGenericChatTemplate(GenericTemplateOptions options) {
  return std::make_unique<GenericChatTemplate>(options);
}

StatusOr<RequestTokenCount> CountRequestTokens(const ChatTemplate& chat_template,
                                               const Tokenizer& tokenizer,
                                               std::string_view request_json) {
  STRATA_ASSIGN_OR_RETURN(std::string prompt, chat_template.Render(request_json));
  STRATA_ASSIGN_OR_RETURN(size_t overhead, chat_template.OverheadTokens(request_json));
  RequestTokenCount count;
  count.tokens = tokenizer.Count(prompt) + overhead;
  count.estimated = tokenizer.IsEstimate();
  return count;
}

}  // namespace strata
