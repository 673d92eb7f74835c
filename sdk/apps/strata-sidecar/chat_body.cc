// A Chat Completions body parsed with its messages memoized by text (chat_body.h).
#include "chat_body.h"

#include <string>
#include <utility>

#include "core/json_scan.h"
#include "core/text_memo.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;

// Read messages by their text, process-wide: each entry is charged its text, about twice that
// for what was read, and the map's node.
size_t MessageCharge(size_t text_bytes) { return 3 * text_bytes + 256; }
internal::TextMemo<ChatBodyMessage>& Messages() {
  static auto* memo =
      new internal::TextMemo<ChatBodyMessage>(kChatMessageMemoBytes, &MessageCharge);
  return *memo;  // never destroyed: used until exit
}

// The body taken apart (see chat_body.h); false to parse it whole.
bool SplitBody(std::string_view body, ChatBody* out) {
  internal::JsonArraySplit split;
  if (!internal::SplitMemberArray(body, "messages", nullptr, 0, &split)) return false;
  const std::vector<std::pair<size_t, size_t>>& elements = split.elements;
  std::string skeleton;
  skeleton.reserve(body.size() - (split.array_end - split.array_begin) + 2);
  skeleton.append(body.substr(0, split.array_begin))
      .append("[]")
      .append(body.substr(split.array_end));
  out->fields = json::parse(skeleton, nullptr, false);
  if (out->fields.is_discarded() || !out->fields.is_object()) return false;
  internal::TextMemo<ChatBodyMessage>& memo = Messages();
  out->messages.reserve(elements.size());
  for (const auto& [from, to] : elements) {
    const std::string_view text = body.substr(from, to - from);
    std::shared_ptr<const ChatBodyMessage> message = memo.Find(text);
    if (message == nullptr) {
      auto parsed = std::make_shared<ChatBodyMessage>();
      parsed->value = json::parse(text.begin(), text.end(), nullptr, false);
      if (parsed->value.is_discarded()) return false;
      StatusOr<ChatMessage> read = ReadChatMessage(parsed->value, 0);
      if (read.ok()) {
        parsed->read = std::make_shared<const ChatMessage>(std::move(read).value());
        parsed->value = nullptr;
        message = std::move(parsed);
        memo.Insert(text, message);
      } else {
        message = std::move(parsed);  // not kept: the request fails, saying why
      }
    }
    out->messages.push_back(std::move(message));
  }
  out->split = true;
  return true;
}

}  // namespace

std::vector<ChatElement> ChatBody::Elements() const {
  std::vector<ChatElement> elements;
  elements.reserve(messages.size());
  for (const auto& m : messages) {
    elements.push_back({m->read, m->read != nullptr ? nullptr : &m->value});
  }
  return elements;
}

std::optional<ChatBody> ParseChatBody(std::string_view body) {
  ChatBody out;
  if (SplitBody(body, &out)) return out;
  out = ChatBody();
  out.fields = json::parse(body.begin(), body.end(), nullptr, false);
  if (out.fields.is_discarded()) return std::nullopt;
  return out;
}

}  // namespace strata::sidecar
