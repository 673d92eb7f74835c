// The generic chat template (chat_template_internal.h).
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

class GenericChatTemplate final : public MemoRenderingTemplate {
 public:
  explicit GenericChatTemplate(GenericTemplateOptions options) : options_(options) {}

  std::string Name() const override {
    return "generic:" + std::to_string(options_.per_message_tokens) + "/" +
           std::to_string(options_.per_request_tokens);
  }

  StatusOr<size_t> OverheadTokens(std::string_view request_json) const override {
    STRATA_ASSIGN_OR_RETURN(Request r, ParseRequest(request_json));
    return OverheadOf(r);
  }

 protected:
  size_t OverheadOf(const Request& r) const override {
    return options_.per_message_tokens * r.messages.size() + options_.per_request_tokens;
  }

 private:
  bool ReadsLastUser(const Request&) const override { return false; }

  Status RenderPreamble(const Request& r, std::string* out) const override {
    for (const ojson& tool : *r.tools) {
      STRATA_RETURN_IF_ERROR(PyJson(tool, out));
      *out += "\n";
    }
    return Status::Ok();
  }

  Status RenderMessage(const Request& r, size_t i, int, std::string* text) const override {
    std::string& out = *text;
    {
      const ojson& m = r.messages[i];
      out += Role(m) + "\n";
      const ojson& content = m["content"];
      if (content.is_string()) {
        out += content.get<std::string>();
      } else {
        for (const ojson& item : content) {
          if (item.is_string()) out += item.get<std::string>();
          if (const ojson* text = Field(item, "text"); text != nullptr && text->is_string())
            out += text->get<std::string>();
        }
      }
      // Only an assistant message's tool calls are checked (NormalizeMessage) and rendered, as
      // the models' own templates do; "tool_calls" on another role is ignored.
      const ojson* calls = Role(m) == "assistant" ? Field(m, "tool_calls") : nullptr;
      if (calls != nullptr && calls->is_array()) {
        for (const ojson& call : *calls) {
          const ojson& fn = CallFunction(call);
          out += "\n" + fn["name"].get<std::string>() + " ";
          STRATA_RETURN_IF_ERROR(PyJson(fn["arguments"], &out));
        }
      }
      out += "\n";
    }
    return Status::Ok();
  }

  void RenderEnd(const Request&, std::string*) const override {}

  GenericTemplateOptions options_;
};

}  // namespace
}  // namespace chat_template_internal

std::unique_ptr<ChatTemplate> MakeGenericChatTemplate(GenericTemplateOptions options) {
  return std::make_unique<chat_template_internal::GenericChatTemplate>(options);
}

}  // namespace strata
