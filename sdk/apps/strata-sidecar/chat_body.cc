// A Chat Completions body parsed with its messages memoized by text (chat_body.h).
#include "chat_body.h"

#include <string>
#include <utility>

#include "core/json_scan.h"
#include "core/text_memo.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;

// Parsed messages by their text, process-wide: each entry is charged its text, about twice that
// for the parsed value, and the map's node.
size_t MessageCharge(size_t text_bytes) { return 3 * text_bytes + 256; }
internal::TextMemo<json>& Messages() {
  static auto* memo = new internal::TextMemo<json>(kChatMessageMemoBytes, &MessageCharge);
  return *memo;  // never destroyed: used until exit
}

// Where the top-level "messages" array is: [begin, end) of its text, and its elements. False when
// the body is not an object the scan takes apart: no or two "messages" keys, a key with an escape
// (it might spell "messages"), a "messages" that is not an array, anything malformed.
bool FindMessages(std::string_view t, size_t* begin, size_t* end,
                  std::vector<std::pair<size_t, size_t>>* elements) {
  constexpr size_t npos = std::string_view::npos;
  const size_t i = internal::SkipJsonSpace(t, 0);
  if (i >= t.size() || t[i] != '{') return false;
  bool seen = false;
  const auto member = [&](std::string_view key, size_t at) -> size_t {
    if (key.find('\\') != npos) return npos;
    if (key != "messages") return internal::SkipJsonValue(t, at);
    if (seen || at >= t.size() || t[at] != '[') return npos;
    seen = true;
    *begin = at;
    *end = internal::SplitJsonArray(t, at + 1, false, elements);
    return *end;
  };
  return internal::WalkJsonObject(t, i + 1, /*after_member=*/false, member) != npos && seen;
}

// The body taken apart (see chat_body.h); false to parse it whole.
bool SplitBody(std::string_view body, ChatBody* out) {
  size_t begin = 0, end = 0;
  std::vector<std::pair<size_t, size_t>> elements;
  if (!FindMessages(body, &begin, &end, &elements)) return false;
  std::string skeleton;
  skeleton.reserve(body.size() - (end - begin) + 2);
  skeleton.append(body.substr(0, begin)).append("[]").append(body.substr(end));
  out->fields = json::parse(skeleton, nullptr, false);
  if (out->fields.is_discarded() || !out->fields.is_object()) return false;
  internal::TextMemo<json>& memo = Messages();
  out->messages.reserve(elements.size());
  for (const auto& [from, to] : elements) {
    const std::string_view text = body.substr(from, to - from);
    std::shared_ptr<const json> message = memo.Find(text);
    if (message == nullptr) {
      auto parsed = std::make_shared<json>(json::parse(text.begin(), text.end(), nullptr, false));
      if (parsed->is_discarded()) return false;
      message = std::move(parsed);
      memo.Insert(text, message);
    }
    out->messages.push_back(std::move(message));
  }
  out->split = true;
  return true;
}

}  // namespace

std::optional<ChatBody> ParseChatBody(std::string_view body) {
  ChatBody out;
  if (SplitBody(body, &out)) return out;
  out = ChatBody();
  out.fields = json::parse(body.begin(), body.end(), nullptr, false);
  if (out.fields.is_discarded()) return std::nullopt;
  return out;
}

}  // namespace strata::sidecar
