// The GLM-4.7 chat template (chat_template_internal.h).
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/utf8.h"
#include "tokenize/chat_template_internal.h"

namespace strata {
namespace chat_template_internal {
namespace {

using internal::Utf8Prefix;  // quotes in messages end on a character boundary

class Glm47ChatTemplate final : public GlmChatTemplate {
 public:
  explicit Glm47ChatTemplate(Glm5TemplateOptions options) : options_(options) {}

  std::string Name() const override { return "glm-4.7:1"; }

 private:
  // keep = (clear_thinking is defined and not clear_thinking) or after the last user.
  bool ReadsLastUser(const Request& r) const override {
    return !(r.clear_thinking.has_value() && !*r.clear_thinking);
  }

  Status RenderPreamble(const Request& r, std::string* text) const override {
    std::string& out = *text;
    out = "[gMASK]<sop>";
    if (!r.tools->empty()) {
      out += kGlmToolsHeader;
      for (const ojson& tool : *r.tools) {
        STRATA_RETURN_IF_ERROR(PyJson(tool, &out));
        out += "\n";
      }
      out += kGlmToolsFooter;
    }
    return Status::Ok();
  }

  Status RenderMessage(const Request& r, size_t i, int last_user, std::string* text) const override {
    std::string& out = *text;
    const MessageList& msgs = r.messages;
    {
      const ojson& m = msgs[i];
      const std::string& role = Role(m);
      if (role == "user") {
        out += "<|user|>" + VisibleText(m["content"]);
      } else if (role == "system") {
        out += "<|system|>" + VisibleText(m["content"]);
      } else if (role == "assistant") {
        out += "<|assistant|>";
        std::string content = VisibleText(m["content"]);
        std::string reasoning;
        if (const ojson* rc = Field(m, "reasoning_content"); rc != nullptr && rc->is_string()) {
          reasoning = rc->get<std::string>();
        } else if (content.find("</think>") != std::string::npos) {
          std::string_view before = RStripChar(BeforeFirst(content, "</think>"), '\n');
          reasoning = std::string(LStripChar(AfterLast(before, "<think>"), '\n'));
          content = std::string(LStripChar(AfterLast(content, "</think>"), '\n'));
        }
        // ((clear_thinking is defined and not clear_thinking) or after the last user) and reasoning
        const bool keep =
            (r.clear_thinking.has_value() && !*r.clear_thinking) || static_cast<int>(i) > last_user;
        out +=
            keep && !reasoning.empty() ? "<think>" + PyStrip(reasoning) + "</think>" : "</think>";
        out += PyStrip(content);
        STRATA_RETURN_IF_ERROR(AppendToolCalls(m, &out));
      } else if (role == "tool") {
        const ojson& c = m["content"];
        if (c.is_string()) {
          if (i == 0 || Role(msgs[i - 1]) != "tool") out += "<|observation|>";
          out.append("<tool_response>")
              .append(c.get_ref<const std::string&>())
              .append("</tool_response>");
        } else {
          // `<|observation|>{% for tr in m.content %}\n<tool_response>`: trim_blocks removes the
          // newline after the for tag, so the results follow each other directly.
          out += "<|observation|>";
          for (const ojson& tr : c) {
            const ojson* output = Field(tr, "output");
            const ojson& shown = output != nullptr ? *output : tr;
            if (shown.is_array() || shown.is_object())
              return InvalidArgumentError(
                  "chat template: " + MessageWhere(i) +
                  " has a tool result part the glm-4.7 template prints as a Python object (give "
                  "the part an \"output\" string, or the message a string content)");
            out += "<tool_response>" + ScalarText(shown) + "</tool_response>";
          }
        }
      }
      // developer: no branch in the template; nothing is rendered.
    }
    return Status::Ok();
  }

  void RenderEnd(const Request& r, std::string* out) const override {
    if (r.add_generation_prompt.value_or(options_.add_generation_prompt)) {
      *out += "<|assistant|>";
      *out += r.enable_thinking.has_value() && !*r.enable_thinking ? "</think>" : "<think>";
    }
  }

  // visible_text: a string, the text parts and string items of an array; other values printed.
  static std::string VisibleText(const ojson& content) {
    if (content.is_string()) return content.get<std::string>();
    std::string out;
    if (content.is_array()) {
      for (const ojson& item : content) {
        if (item.is_string()) {
          out += item.get<std::string>();
        } else if (const ojson* type = Field(item, "type"); type != nullptr && *type == "text") {
          if (const ojson* text = Field(item, "text")) out += ScalarText(*text);
        }
      }
    }
    return out;
  }

  Glm5TemplateOptions options_;
};

}  // namespace
}  // namespace chat_template_internal

std::unique_ptr<ChatTemplate> MakeGlm47ChatTemplate(Glm5TemplateOptions options) {
  return std::make_unique<chat_template_internal::Glm47ChatTemplate>(options);
}

}  // namespace strata
