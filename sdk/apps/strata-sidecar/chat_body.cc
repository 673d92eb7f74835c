// A Chat Completions body parsed with its messages memoized by text (chat_body.h).
#include "chat_body.h"

#include <algorithm>
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

internal::TextMemo<ChatTools>& Tools() {
  static auto* memo = new internal::TextMemo<ChatTools>(kChatToolsMemoBytes, &MessageCharge);
  return *memo;  // never destroyed: used until exit
}

// The "tools" array of `body`, parsed once per distinct text; null when the scan does not find
// one array (then the skeleton keeps "tools" as sent), *failed when its text is not JSON.
std::shared_ptr<const ChatTools> SplitTools(std::string_view body, internal::JsonArraySplit* split,
                                            bool* failed) {
  if (!internal::SplitMemberArray(body, "tools", nullptr, 0, split)) return nullptr;
  const std::string_view text =
      body.substr(split->array_begin, split->array_end - split->array_begin);
  std::shared_ptr<const ChatTools> tools = Tools().Find(text);
  if (tools != nullptr) return tools;
  json value = json::parse(text.begin(), text.end(), nullptr, false);
  if (value.is_discarded()) {
    *failed = true;
    return nullptr;
  }
  tools = ChatTools::Of(std::move(value));
  Tools().Insert(text, tools);
  return tools;
}

// The body taken apart (see chat_body.h); false to parse it whole.
bool SplitBody(std::string_view body, ChatBody* out) {
  internal::JsonArraySplit split;
  if (!internal::SplitMemberArray(body, "messages", nullptr, 0, &split)) return false;
  const std::vector<std::pair<size_t, size_t>>& elements = split.elements;
  internal::JsonArraySplit tools_split;
  bool tools_failed = false;
  out->tools = SplitTools(body, &tools_split, &tools_failed);
  if (tools_failed) return false;
  // The skeleton: the body with the arrays taken out written as [].
  std::vector<std::pair<size_t, size_t>> cut = {{split.array_begin, split.array_end}};
  if (out->tools != nullptr) cut.emplace_back(tools_split.array_begin, tools_split.array_end);
  std::sort(cut.begin(), cut.end());
  std::string skeleton;
  size_t at = 0;
  for (const auto& [begin, end] : cut) {
    skeleton.append(body.substr(at, begin - at)).append("[]");
    at = end;
  }
  skeleton.append(body.substr(at));
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

std::shared_ptr<const ChatTools> ChatTools::Of(json value) {
  auto tools = std::make_shared<ChatTools>();
  if (value.is_array()) {
    for (const json& tool : value) {
      tools->dumps.push_back(tool.dump(-1, ' ', false, json::error_handler_t::replace));
    }
  }
  tools->value = std::move(value);
  return tools;
}

std::shared_ptr<const ChatTools> ChatTools::None() {
  static const std::shared_ptr<const ChatTools> none = Of(json::array());
  return none;
}

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
