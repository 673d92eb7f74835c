// Rendering a request message by message through the render memo, and what the GLM templates
// share (chat_template_internal.h).
#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenize/chat_template_internal.h"
#include "tokenize/shared_render.h"
#include "tokenize/template_memo.h"

namespace strata::chat_template_internal {

// A kept rendering (the render memo below).
struct RenderedRequest {
  uint64_t renderer = 0;  // the template instance that rendered it (MemoRenderingTemplate::id_)
  Request request;
  std::string text;  // the prompt: the preamble, the messages and the template's ending
  std::vector<size_t> offsets;  // where each message starts in `text`
  size_t preamble_bytes = 0;
  size_t messages_end = 0;  // where the template's ending starts in `text`
  int last_user = -1;       // index of the last user message, -1 when there is none
  uint64_t serial = 0;      // never reused (tokenize_internal::SharedRender)
  uint64_t base_serial = 0;  // the rendering whose first kept_bytes of text this one starts with
  size_t kept_bytes = 0;
};

namespace {

// Render memo. The last renderings of every template are kept with their requests, process-wide
// (64, 256 MB: an agent holds its own template, and a sidecar holds many agents). A request whose
// fields other than the messages equal a kept one's, and whose first messages are the same
// objects (ParseRequest hands out the same object for the same message text), continues that
// rendering: the kept text is reused up to the first message whose rendering could differ, and
// only the messages from there are rendered. A message's rendering depends on the messages before
// it, on the index of the last user message (ReadsLastUser) and, for the first tool result of a
// run, on the rest of the run; so the reuse stops at the first message not shared, at the first
// assistant message whose view of the last user message changed, and before a trailing run of
// tool results.

bool SameFields(const Request& a, const Request& b) {
  return a.reasoning_effort == b.reasoning_effort && a.enable_thinking == b.enable_thinking &&
         a.clear_thinking == b.clear_thinking &&
         a.add_generation_prompt == b.add_generation_prompt &&
         (a.tools == b.tools || *a.tools == *b.tools);
}

// Index of the last user message of `r`, whose first `same` messages are those of `base`.
int LastUser(const Request& r, const RenderedRequest* base, size_t same) {
  for (size_t i = r.messages.size(); i-- > same;)
    if (Role(r.messages[i]) == "user") return static_cast<int>(i);
  if (base != nullptr && base->last_user < static_cast<int>(same)) return base->last_user;
  for (size_t i = same; i-- > 0;)
    if (Role(r.messages[i]) == "user") return static_cast<int>(i);
  return -1;
}

RecentList<RenderedRequest>& RenderedRequests() {
  static auto* rendered = new RecentList<RenderedRequest>(64, 256u << 20);  // never destroyed
  return *rendered;
}

// Starts `entry` with the first `from` messages of `base` (the preamble, their text and offsets).
// A base this rendering `continues` is taken out of the kept renderings and, when nobody else
// holds it then (a prompt handed out earlier and still held keeps its text), its buffers are
// reused: only the messages from `from` on are written, instead of a copy of the whole prompt
// (and the page faults of a fresh buffer) on every request.
void ContinueText(std::shared_ptr<const RenderedRequest> base, bool continues, size_t from,
                  size_t body_bytes, RenderedRequest* entry) {
  const size_t kept_bytes = from < base->offsets.size() ? base->offsets[from] : base->messages_end;
  entry->preamble_bytes = base->preamble_bytes;
  entry->base_serial = base->serial;
  entry->kept_bytes = kept_bytes;
  if (continues) {
    RenderedRequests().Take(base.get());  // the memo's reference, dropped at once
    if (base.use_count() == 1) {
      // Made non-const (make_shared<RenderedRequest>) and seen by no one else: safe to take apart.
      auto& mine = const_cast<RenderedRequest&>(*base);
      entry->text = std::move(mine.text);
      entry->text.resize(kept_bytes);
      entry->offsets = std::move(mine.offsets);
      entry->offsets.resize(from);
      tokenize_internal::CountInPlace(/*render=*/true);
      return;
    }
  }
  // One allocation for the kept part and the new messages (their rendering is about as long as
  // their JSON).
  entry->text.reserve(std::max(kept_bytes, body_bytes) + 64);
  entry->text.assign(base->text, 0, kept_bytes);
  entry->offsets.assign(base->offsets.begin(), base->offsets.begin() + from);
}

}  // namespace

StatusOr<std::string> MemoRenderingTemplate::Render(std::string_view request_json) const {
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<const RenderedRequest> kept, RenderKept(request_json));
  return kept->text;
}

StatusOr<RenderedPrompt> MemoRenderingTemplate::RenderWithOffsets(
    std::string_view request_json) const {
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<const RenderedRequest> kept, RenderKept(request_json));
  RenderedPrompt p;
  p.text = kept->text;
  p.message_offsets = kept->offsets;
  p.preamble_bytes = kept->preamble_bytes;
  return p;
}

StatusOr<std::shared_ptr<const std::string>> MemoRenderingTemplate::RenderShared(
    std::string_view request_json) const {
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<const RenderedRequest> kept, RenderKept(request_json));
  return std::shared_ptr<const std::string>(kept, &kept->text);  // owned by the kept rendering
}

StatusOr<tokenize_internal::SharedRender> MemoRenderingTemplate::RenderSharedWithOverhead(
    std::string_view request_json, const tokenize_internal::ContinuedBody* continued) const {
  uint64_t parsed_body = 0;
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<const RenderedRequest> kept,
                          RenderKept(request_json, continued, &parsed_body));
  tokenize_internal::SharedRender render;
  render.parsed_body = parsed_body;
  render.overhead_tokens = OverheadOf(kept->request);
  render.serial = kept->serial;
  render.base_serial = kept->base_serial;
  render.kept_bytes = kept->kept_bytes;
  render.text = std::shared_ptr<const std::string>(kept, &kept->text);  // owned by the rendering
  return render;
}

StatusOr<std::shared_ptr<const RenderedRequest>> MemoRenderingTemplate::RenderKept(
    std::string_view request_json, const tokenize_internal::ContinuedBody* continued,
    uint64_t* parsed_body) const {
  STRATA_ASSIGN_OR_RETURN(Request r, ParseRequest(request_json, continued, parsed_body));
  // The kept rendering with the same fields and the longest run of the same first messages.
  std::shared_ptr<const RenderedRequest> base;
  size_t same = 0;
  for (auto& kept : RenderedRequests().Snapshot()) {
    if (kept->renderer != id_ || !SameFields(kept->request, r)) continue;
    const size_t k = kept->request.messages.SharedPrefix(r.messages);
    if (base == nullptr || k > same) {
      base = std::move(kept);
      same = k;
    }
    if (same == r.messages.size()) break;  // none can share more (the most recent first)
  }
  // The same request again (the same fields and the same message objects: ParseRequest hands out
  // the kept body's own messages for the same body): its kept rendering is this one, with its
  // serial, so a caller holding it knows that nothing changed.
  if (base != nullptr && same == r.messages.size() && same == base->request.messages.size()) {
    RenderedRequests().Keep(base, base.get());  // the most recent again
    return base;
  }
  auto entry = std::make_shared<RenderedRequest>();
  entry->renderer = id_;
  entry->serial = NextId();  // one sequence for templates and renderings: never reused
  entry->last_user = LastUser(r, base.get(), same);
  size_t from = 0;
  if (base != nullptr) {
    from = same;
    if (ReadsLastUser(r) && base->last_user != entry->last_user)
      from = std::min(from, static_cast<size_t>(std::min(base->last_user, entry->last_user) + 1));
    while (from > 0 && Role(r.messages[from - 1]) == "tool") --from;
    // In place of the base when this rendering continues it (reuses at least half of it).
    const bool continues = from >= base->offsets.size() / 2;
    ContinueText(std::move(base), continues, from, request_json.size(), entry.get());
  } else {
    STRATA_RETURN_IF_ERROR(RenderPreamble(r, &entry->text));
    entry->preamble_bytes = entry->text.size();
  }
  for (size_t i = from; i < r.messages.size(); ++i) {
    entry->offsets.push_back(entry->text.size());
    STRATA_RETURN_IF_ERROR(RenderMessage(r, i, entry->last_user, &entry->text));
  }
  entry->messages_end = entry->text.size();
  RenderEnd(r, &entry->text);
  entry->request = std::move(r);
  std::shared_ptr<const RenderedRequest> kept = std::move(entry);
  RenderedRequests().Keep(kept, nullptr);  // a base it continues was taken out already
  return kept;
}

uint64_t MemoRenderingTemplate::NextId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

void ClearRenderMemo() { RenderedRequests().Clear(); }

}  // namespace strata::chat_template_internal

namespace strata::tokenize_internal {

StatusOr<SharedRender> RenderSharedWithOverhead(const ChatTemplate& chat_template,
                                                std::string_view request_json,
                                                const ContinuedBody* continued) {
  const auto* memo =
      dynamic_cast<const chat_template_internal::MemoRenderingTemplate*>(&chat_template);
  SharedRender render;
  if (memo == nullptr) {
    STRATA_ASSIGN_OR_RETURN(render.text, chat_template.RenderShared(request_json));
    return render;
  }
  return memo->RenderSharedWithOverhead(request_json, continued);
}

}  // namespace strata::tokenize_internal

namespace strata::chat_template_internal {

const ojson& CallFunction(const ojson& call) {
  const ojson* f = Field(call, "function");
  return Truthy(f) ? *f : call;
}

Status AppendToolCalls(const ojson& m, std::string* out) {
  const ojson* calls = Field(m, "tool_calls");
  if (!Truthy(calls)) return Status::Ok();
  for (const ojson& call : *calls) {
    const ojson& fn = CallFunction(call);
    *out += "<tool_call>" + fn["name"].get<std::string>();
    for (auto it = fn["arguments"].begin(); it != fn["arguments"].end(); ++it) {
      *out += "<arg_key>" + it.key() + "</arg_key><arg_value>";
      if (it.value().is_string()) {
        *out += it.value().get<std::string>();
      } else {
        STRATA_RETURN_IF_ERROR(PyJson(it.value(), out));
      }
      *out += "</arg_value>";
    }
    *out += "</tool_call>";
  }
  return Status::Ok();
}

StatusOr<size_t> GlmChatTemplate::OverheadTokens(std::string_view request_json) const {
  STRATA_RETURN_IF_ERROR(ParseRequest(request_json).status());
  return size_t{0};
}

}  // namespace strata::chat_template_internal
