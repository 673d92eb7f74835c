// The GLM-5.3-Flash chat template (chat_template_internal.h).
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

class Glm53ChatTemplate final : public GlmChatTemplate {
 public:
  explicit Glm53ChatTemplate(Glm5TemplateOptions options) : options_(options) {}

  std::string Name() const override { return "glm-5.3:1"; }

 private:
  bool ReadsLastUser(const Request& r) const override { return r.clear_thinking.value_or(false); }

  Status RenderPreamble(const Request& r, std::string* text) const override {
    std::string& out = *text;
    out = "[gMASK]<sop>";
    // effective = reasoning_effort if it is 'low' or 'high' else 'max'; printed capitalised.
    const std::string effort = r.reasoning_effort == "low"    ? "Low"
                               : r.reasoning_effort == "high" ? "High"
                                                              : "Max";
    out += "<|system|>Reasoning Effort: " + effort;
    if (!r.tools->empty()) {
      out += kGlmToolsHeader;
      for (const ojson& tool : *r.tools) {
        const ojson& fn = Unwrap(tool);
        if (Truthy(Field(fn, "defer_loading"))) continue;
        STRATA_RETURN_IF_ERROR(ToolToJson(fn, &out));
        out += "\n";
      }
      out += kGlmToolsFooter;
    }
    return Status::Ok();
  }

  Status RenderMessage(const Request& r, size_t i, int last_user, std::string* text) const override {
    std::string& out = *text;
    const bool clear_thinking = r.clear_thinking.value_or(false);
    const MessageList& msgs = r.messages;
    {
      const ojson& m = msgs[i];
      const std::string& role = Role(m);
      if (role == "user") {
        out += "<|user|>";
        STRATA_RETURN_IF_ERROR(VisibleText(m["content"], &out));
      } else if (role == "system") {
        out += "<|system|>";
        STRATA_RETURN_IF_ERROR(VisibleText(m["content"], &out));
      } else if (role == "assistant") {
        out += "<|assistant|>";
        std::string content;
        STRATA_RETURN_IF_ERROR(VisibleText(m["content"], &content));
        std::optional<std::string> reasoning;
        if (const ojson* rc = Field(m, "reasoning_content"); rc != nullptr && rc->is_string()) {
          reasoning = rc->get<std::string>();
        } else if (content.find("</think>") != std::string::npos) {
          reasoning = std::string(AfterLast(BeforeFirst(content, "</think>"), "<think>"));
          content = std::string(AfterLast(content, "</think>"));
        }
        const bool keep = !clear_thinking || static_cast<int>(i) > last_user;
        out += keep && reasoning ? "<think>" + *reasoning + "</think>" : "<think></think>";
        out += PyStrip(content);
        STRATA_RETURN_IF_ERROR(AppendToolCalls(m, &out));
      } else if (role == "tool") {
        if (i == 0 || Role(msgs[i - 1]) != "tool") {
          out += "<|observation|>";
          STRATA_RETURN_IF_ERROR(ToolBlock(r, i, &out));
        }
      }
      // developer: the template has no branch for it; nothing is rendered.
    }
    return Status::Ok();
  }

  void RenderEnd(const Request& r, std::string* out) const override {
    if (r.add_generation_prompt.value_or(options_.add_generation_prompt)) {
      // The published template opens the thinking block unconditionally; it does not read
      // enable_thinking.
      *out += "<|assistant|><think>";
    }
  }

  // {%- if 'function' in tool -%}{%- set tool = tool['function'] -%}
  static const ojson& Unwrap(const ojson& tool) {
    const ojson* f = Field(tool, "function");
    return f != nullptr ? *f : tool;
  }

  // The template's tool_to_json macro: `{"k": tojson(v), ...}` without defer_loading and strict;
  // the key is printed raw between the quotes.
  static Status ToolToJson(const ojson& tool, std::string* out) {
    if (!tool.is_object()) return PyJson(tool, out);  // not reached: tools are checked objects
    *out += "{";
    bool first = true;
    for (auto it = tool.begin(); it != tool.end(); ++it) {
      if (it.key() == "defer_loading" || it.key() == "strict") continue;
      if (!first) *out += ", ";
      first = false;
      *out += "\"" + it.key() + "\": ";
      STRATA_RETURN_IF_ERROR(PyJson(it.value(), out));
    }
    *out += "}";
    return Status::Ok();
  }

  // The template's visible_text macro.
  static Status VisibleText(const ojson& content, std::string* out) {
    if (content.is_string()) {
      *out += content.get_ref<const std::string&>();
      return Status::Ok();
    }
    if (content.is_array()) {
      for (const ojson& item : content) {
        if (item.is_string()) {
          *out += item.get_ref<const std::string&>();
          continue;
        }
        const ojson* type = Field(item, "type");
        if (type == nullptr || !type->is_string()) continue;
        const std::string& t = type->get_ref<const std::string&>();
        if (t == "text") {
          const ojson* text = Field(item, "text");
          if (text != nullptr) *out += ScalarText(*text);
        } else if (t == "image" || t == "image_url") {
          *out += "<|begin_of_image|><|image|><|end_of_image|>";
        } else if (t == "video" || t == "video_url") {
          *out += "<|begin_of_video|><|video|><|end_of_video|>";
        } else if (t == "audio" || t == "audio_url" || t == "input_audio") {
          *out += "<|begin_of_audio|><|end_of_audio|>";
        }
      }
      return Status::Ok();
    }
    if (content.is_null()) return Status::Ok();
    if (content.is_object())
      return InvalidArgumentError(
          "chat template: a content value is an object (expected a string "
          "or an array of parts)");
    *out += ScalarText(content);
    return Status::Ok();
  }

  // id_of(obj): tool_call_id if truthy, else id if truthy, else "".
  static std::string IdOf(const ojson& obj) {
    for (const char* key : {"tool_call_id", "id"}) {
      const ojson* v = Field(obj, key);
      if (Truthy(v)) return ScalarText(*v);
    }
    return "";
  }

  // is_list_of_outputs(m): content is truthy and content[0] has "output".
  static bool IsListOfOutputs(const ojson& m) {
    const ojson& c = m["content"];
    return c.is_array() && !c.empty() && Field(c[0], "output") != nullptr;
  }

  // x is a non-empty list whose first item has type "tool_reference".
  static bool IsToolReferenceList(const ojson* x) {
    if (x == nullptr || !x->is_array() || x->empty()) return false;
    const ojson* type = Field((*x)[0], "type");
    return type != nullptr && *type == "tool_reference";
  }

  static Status ToolReferences(const Request& r, const ojson& refs, std::string* out) {
    if (r.tools->empty())
      return InvalidArgumentError(
          "chat template: a tool_reference result needs \"tools\" (the "
          "template defines that macro only with tools)");
    *out += "<tool_response><tools>\n";
    for (const ojson& ref : refs) {
      const ojson* ref_name = Field(ref, "name");
      for (const ojson& tool : *r.tools) {
        const ojson& fn = Unwrap(tool);
        const ojson* name = Field(fn, "name");
        bool same = (name == nullptr && ref_name == nullptr) ||
                    (name != nullptr && ref_name != nullptr && *name == *ref_name);
        if (!same) continue;
        STRATA_RETURN_IF_ERROR(ToolToJson(fn, out));
        *out += "\n";
      }
    }
    *out += "</tools></tool_response>";
    return Status::Ok();
  }

  static Status ToolResponse(const ojson* content, std::string* out) {
    *out += "<tool_response>";
    if (content != nullptr) STRATA_RETURN_IF_ERROR(VisibleText(*content, out));
    *out += "</tool_response>";
    return Status::Ok();
  }

  static Status RenderEntry(const Request& r, const ojson& entry, std::string* out) {
    const ojson* output = Field(entry, "output");
    if (IsToolReferenceList(output)) return ToolReferences(r, *output, out);
    return ToolResponse(output, out);
  }

  // render_tool_response(m).
  static Status RenderToolResponse(const Request& r, const ojson& m, std::string* out) {
    const ojson& c = m["content"];
    if (c.is_string()) {
      // Appended piece by piece: a tool result can be megabytes, copied once.
      out->append("<tool_response>")
          .append(c.get_ref<const std::string&>())
          .append("</tool_response>");
      return Status::Ok();
    }
    if (IsToolReferenceList(&c)) return ToolReferences(r, c, out);
    if (IsListOfOutputs(m)) {
      for (const ojson& entry : c) STRATA_RETURN_IF_ERROR(RenderEntry(r, entry, out));
      return Status::Ok();
    }
    return ToolResponse(&c, out);
  }

  // The results of the run of tool messages starting at `start`: in the order of the preceding
  // assistant turn's tool_calls when every result id is present, unique and matches a call and
  // the call ids are present and unique; otherwise in message order.
  static Status ToolBlock(const Request& r, size_t start, std::string* out) {
    const MessageList& msgs = r.messages;
    size_t end = start;
    while (end + 1 < msgs.size() && Role(msgs[end + 1]) == "tool") ++end;
    const ojson* calls = nullptr;
    if (start > 0 && Role(msgs[start - 1]) == "assistant") {
      const ojson* tc = Field(msgs[start - 1], "tool_calls");
      if (Truthy(tc)) calls = tc;
    }
    // Result ids of the run, in order (list-of-outputs messages contribute one per entry).
    std::vector<std::string> result_ids;
    for (size_t k = start; k <= end; ++k) {
      if (IsListOfOutputs(msgs[k])) {
        for (const ojson& entry : msgs[k]["content"]) result_ids.push_back(IdOf(entry));
      } else {
        result_ids.push_back(IdOf(msgs[k]));
      }
    }
    bool can_sort = calls != nullptr;
    std::vector<std::string> call_ids;
    if (can_sort) {
      for (const ojson& call : *calls) call_ids.push_back(IdOf(call));
      for (const std::string& id : result_ids) {
        if (id.empty() || std::count(result_ids.begin(), result_ids.end(), id) > 1 ||
            std::find(call_ids.begin(), call_ids.end(), id) == call_ids.end()) {
          can_sort = false;
          break;
        }
      }
      for (size_t c = 0; can_sort && c < call_ids.size(); ++c) {
        if (call_ids[c].empty() ||
            std::find(call_ids.begin() + c + 1, call_ids.end(), call_ids[c]) != call_ids.end())
          can_sort = false;
      }
    }
    if (!can_sort) {
      for (size_t k = start; k <= end; ++k)
        STRATA_RETURN_IF_ERROR(RenderToolResponse(r, msgs[k], out));
      return Status::Ok();
    }
    for (const std::string& call_id : call_ids) {
      for (size_t k = start; k <= end; ++k) {
        if (IsListOfOutputs(msgs[k])) {
          for (const ojson& entry : msgs[k]["content"])
            if (IdOf(entry) == call_id) STRATA_RETURN_IF_ERROR(RenderEntry(r, entry, out));
        } else if (IdOf(msgs[k]) == call_id) {
          STRATA_RETURN_IF_ERROR(RenderToolResponse(r, msgs[k], out));
        }
      }
    }
    return Status::Ok();
  }

  Glm5TemplateOptions options_;
};

}  // namespace
}  // namespace chat_template_internal

std::unique_ptr<ChatTemplate> MakeGlm5ChatTemplate(Glm5TemplateOptions options) {
  return std::make_unique<chat_template_internal::Glm53ChatTemplate>(options);
}

}  // namespace strata
