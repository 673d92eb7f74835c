// The chat templates' shared parts, and which file does what. The templates are our own renderers
// of the GLM-5.3-Flash and GLM-4.7 chat_template.jinja files (zai-org, Hugging Face), producing
// what transformers' Jinja environment produces (trim_blocks + lstrip_blocks; `tojson` = Python
// json.dumps(ensure_ascii=False) with ", " and ": "), after vLLM's request preprocessing (tool-call
// "arguments" strings parsed into objects, null content as "", a message's "reasoning" as its
// "reasoning_content"). docs/templates.md lists every branch.
//
//   template_python.cc   Python-compatible json.dumps (`tojson`) and Python's string methods
//   template_request.cc  the request as a template receives it: parsing, vLLM's normalisation, and
//                        the parsed-body and message memos (template_memo.h)
//   template_render.cc   rendering message by message through the render memo
//                        (MemoRenderingTemplate), and tool calls as the GLM templates print them
//   glm53_template.cc    GLM-5.3-Flash (MakeGlm5ChatTemplate)
//   glm47_template.cc    GLM-4.7 (MakeGlm47ChatTemplate)
//   generic_template.cc  the generic template (MakeGenericChatTemplate)
//   chat_template.cc     templates by name and by model, counting a request's tokens, the memos'
//                        reset
//
// Every JSON value walked here comes from text whose nesting was checked first (CheckJsonDepth),
// so the recursive walks are bounded by kChatTemplateMaxJsonDepth.
#ifndef STRATA_SRC_TOKENIZE_CHAT_TEMPLATE_INTERNAL_H_
#define STRATA_SRC_TOKENIZE_CHAT_TEMPLATE_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/thread_annotations.h"
#include "strata/chat_template.h"
#include "strata/status.h"
#include "tokenize/shared_render.h"

namespace strata::chat_template_internal {

using ojson = nlohmann::ordered_json;

// --- template_python.cc ----------------------------------------------------------------------

// INVALID_ARGUMENT ("chat template: <what> ...") when `text` nests deeper than
// kChatTemplateMaxJsonDepth.
Status CheckNesting(std::string_view text, const std::string& what);
// Python json.dumps(value, ensure_ascii=False) with its default separators. `depth` bounds the
// recursion (the input was nesting-checked; this is the second line of defence).
Status PyJson(const ojson& v, std::string* out, size_t depth = 0);
// Python's str.strip() with no argument.
std::string PyStrip(std::string_view s);
// Python's str.rstrip(c) and str.lstrip(c) for one character.
std::string_view RStripChar(std::string_view s, char c);
std::string_view LStripChar(std::string_view s, char c);
// s.split(sep)[0] and s.split(sep)[-1].
std::string_view BeforeFirst(std::string_view s, std::string_view sep);
std::string_view AfterLast(std::string_view s, std::string_view sep);
// Jinja truthiness of a JSON value (undefined/missing is false).
bool Truthy(const ojson* v);
// The field `key` of `object`, or null when `object` is not an object or has no such field.
const ojson* Field(const ojson& object, const char* key);
// What `{{ value }}` prints for a scalar (strings verbatim, numbers as Python prints them).
std::string ScalarText(const ojson& v);

// The most recent items of a memo (each with a `text`), most recent first, bounded by their number
// and the bytes of their texts. Thread-safe; the items are never changed once kept.
template <typename T>
class RecentList {
 public:
  RecentList(size_t max_items, size_t max_bytes) : max_items_(max_items), max_bytes_(max_bytes) {}

  std::vector<std::shared_ptr<const T>> Snapshot() const {
    internal::MutexLock lock(mu_);
    return std::vector<std::shared_ptr<const T>>(items_.begin(), items_.end());
  }

  // Keeps `item` as the most recent, in place of `replaced` (an item it continues) when that is
  // given and still kept. An item over a quarter of the bytes allowed is not kept.
  void Keep(std::shared_ptr<const T> item, const T* replaced) {
    if (item->text.size() > max_bytes_ / 4) return;
    internal::MutexLock lock(mu_);
    for (auto it = items_.begin(); it != items_.end(); ++it) {
      if (it->get() != replaced && it->get() != item.get()) continue;
      bytes_ -= (*it)->text.size();
      items_.erase(it);
      break;
    }
    bytes_ += item->text.size();
    items_.push_front(std::move(item));
    while (!items_.empty() && (items_.size() > max_items_ || bytes_ > max_bytes_)) {
      bytes_ -= items_.back()->text.size();
      items_.pop_back();
    }
  }

  // Removes `item` and returns it (null when it is no longer kept). A caller that then holds the
  // only reference (use_count() == 1) may reuse the item's buffers for the item that continues
  // it: nobody else can see it any more.
  std::shared_ptr<const T> Take(const T* item) {
    internal::MutexLock lock(mu_);
    for (auto it = items_.begin(); it != items_.end(); ++it) {
      if (it->get() != item) continue;
      std::shared_ptr<const T> taken = std::move(*it);
      bytes_ -= taken->text.size();
      items_.erase(it);
      return taken;
    }
    return nullptr;
  }

  void Clear() {
    internal::MutexLock lock(mu_);
    items_.clear();
    bytes_ = 0;
  }

 private:
  const size_t max_items_;
  const size_t max_bytes_;
  mutable internal::Mutex mu_;
  std::list<std::shared_ptr<const T>> items_ STRATA_GUARDED_BY(mu_);
  size_t bytes_ STRATA_GUARDED_BY(mu_) = 0;
};

// --- template_request.cc ---------------------------------------------------------------------

// A request's message, normalised (vLLM's preprocessing) and shared with the message memo.
using MessagePtr = std::shared_ptr<const ojson>;

// A request's messages, normalised; never changed once made. Held in chunks of kChunk messages: a
// body that continues an earlier one shares that body's whole chunks and copies at most one
// partial chunk, so a request costs its new messages, not a pointer copy per message of the
// conversation. A request of a kept body is handed its list, not a copy of it.
class MessageList {
 public:
  static constexpr size_t kChunk = 256;
  using Chunk = std::vector<MessagePtr>;

  MessageList() = default;
  size_t size() const { return items_ != nullptr ? items_->size : 0; }
  const ojson* get(size_t i) const { return (*items_->chunks[i / kChunk])[i % kChunk].get(); }
  const ojson& operator[](size_t i) const { return *get(i); }
  // Whether both are the same list (the same body's): then every message is the same object.
  bool SameList(const MessageList& other) const {
    return items_ != nullptr && items_ == other.items_;
  }
  // How many leading messages of the two are the same objects (a chunk both share counts whole).
  size_t SharedPrefix(const MessageList& other) const;

 private:
  friend class MessageListBuilder;
  struct Chunks {
    std::vector<std::shared_ptr<const Chunk>> chunks;
    size_t size = 0;
  };
  std::shared_ptr<const Chunks> items_;
};

// Makes a MessageList: the first `keep` messages of `base` (its whole chunks shared), then the
// messages pushed.
class MessageListBuilder {
 public:
  MessageListBuilder(const MessageList* base, size_t keep);
  void push_back(MessagePtr message);
  // Message i, one pushed here (i >= keep).
  MessagePtr& own(size_t i);
  MessageList Finish() &&;

 private:
  std::shared_ptr<MessageList::Chunks> items_ = std::make_shared<MessageList::Chunks>();
  std::vector<std::shared_ptr<MessageList::Chunk>> own_;  // chunks first_own_ on, writable
  size_t first_own_ = 0;
};

// The request as the template receives it.
// An empty "tools" array, shared by every request that has none.
const std::shared_ptr<const ojson>& EmptyTools();

struct Request {
  MessageList messages;
  // The request's "tools" (an array; empty when it has none), shared with the parsed body it came
  // from: a body that repeats the last one's fields does not copy them.
  std::shared_ptr<const ojson> tools = EmptyTools();
  std::optional<std::string> reasoning_effort;  // nullopt: undefined
  std::optional<bool> enable_thinking;
  std::optional<bool> clear_thinking;
  std::optional<bool> add_generation_prompt;
};

// Parses and normalises a chat-completions request body; INVALID_ARGUMENT saying which field is
// wrong. Continues the kept body sharing the longest prefix with it, so a request that repeats an
// earlier one and adds to its end costs its new bytes. With `continued`, the kept body it names
// is continued from the bytes it is known to share, without comparing them (or searching the
// others) when it is still kept. *parsed_body (when given): the id of the kept body this request
// now is (0: none kept).
StatusOr<Request> ParseRequest(std::string_view request_json,
                               const tokenize_internal::ContinuedBody* continued = nullptr,
                               uint64_t* parsed_body = nullptr);
// Forgets the kept bodies and messages (tokenize_internal::ClearChatTemplateMemos).
void ClearRequestMemos();
// A JSON object whose every value is a string, parsed as ojson::parse parses it; nullopt for any
// other text (other values, a \u escape, a duplicate key, invalid UTF-8, anything malformed).
std::optional<ojson> ParseFlatStringObject(std::string_view text);

// "messages[i]", as error messages name a message.
inline std::string MessageWhere(size_t i) { return "messages[" + std::to_string(i) + "]"; }

// A normalised message's role.
inline const std::string& Role(const ojson& m) {
  return m["role"].get_ref<const std::string&>();
}

// --- template_render.cc ----------------------------------------------------------------------

// A template rendered message by message, through the render memo (template_render.cc says when
// a kept rendering is continued).
struct RenderedRequest;  // a kept rendering (template_render.cc)

class MemoRenderingTemplate : public ChatTemplate {
 public:
  StatusOr<std::string> Render(std::string_view request_json) const override;
  StatusOr<RenderedPrompt> RenderWithOffsets(std::string_view request_json) const override;
  // The kept rendering's own text (no copy).
  StatusOr<std::shared_ptr<const std::string>> RenderShared(
      std::string_view request_json) const override;
  // RenderShared, OverheadTokens and what the rendering continues, from one parse of the request
  // (tokenize_internal::RenderSharedWithOverhead).
  StatusOr<tokenize_internal::SharedRender> RenderSharedWithOverhead(
      std::string_view request_json,
      const tokenize_internal::ContinuedBody* continued = nullptr) const;

 protected:
  // OverheadTokens of a parsed request.
  virtual size_t OverheadOf(const Request& r) const = 0;

 private:
  // The rendering of `request_json`, continued from the kept one it shares most messages with,
  // and kept.
  // `continued` and `parsed_body`: as for ParseRequest.
  StatusOr<std::shared_ptr<const RenderedRequest>> RenderKept(
      std::string_view request_json, const tokenize_internal::ContinuedBody* continued = nullptr,
      uint64_t* parsed_body = nullptr) const;
  // Whether an assistant message's rendering depends on the index of the last user message.
  virtual bool ReadsLastUser(const Request& r) const = 0;
  // Everything before the first message.
  virtual Status RenderPreamble(const Request& r, std::string* out) const = 0;
  // Message i (`last_user`: the index of the last user message, -1 when there is none).
  virtual Status RenderMessage(const Request& r, size_t i, int last_user, std::string* out) const = 0;
  // Everything after the last message (the generation prompt).
  virtual void RenderEnd(const Request& r, std::string* out) const = 0;

  static uint64_t NextId();
  // Never reused, unlike an address: a kept rendering is continued by its own template only.
  const uint64_t id_ = NextId();
};

// Forgets the kept renderings (tokenize_internal::ClearChatTemplateMemos).
void ClearRenderMemo();

// The tool call's function object (`{%- if tc.function %}{%- set tc = tc.function %}`).
const ojson& CallFunction(const ojson& call);
// An assistant message's tool calls as the GLM templates print them (<tool_call>name<arg_key>...).
Status AppendToolCalls(const ojson& m, std::string* out);

// What the GLM templates share: the tools block's fixed text, and the prompt is the whole request
// (no tokens beyond it) rendered with offsets.
inline constexpr char kGlmToolsHeader[] =
    "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user "
    "query.\n\nYou are provided with function signatures within <tools></tools> XML "
    "tags:\n<tools>\n";
inline constexpr char kGlmToolsFooter[] =
    "</tools>\n\nFor each function call, output the function name and arguments within the "
    "following XML format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key>"
    "<arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>"
    "{arg-value-2}</arg_value>...</tool_call>";

class GlmChatTemplate : public MemoRenderingTemplate {
 public:
  StatusOr<size_t> OverheadTokens(std::string_view request_json) const override;

 protected:
  size_t OverheadOf(const Request&) const override { return 0; }
};

}  // namespace strata::chat_template_internal

#endif  // STRATA_SRC_TOKENIZE_CHAT_TEMPLATE_INTERNAL_H_
