// A Chat Completions body parsed with its messages memoized by text (chat_body.h).
#include "chat_body.h"

#include <algorithm>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/json_scan.h"
#include "core/json_text.h"
#include "core/text_memo.h"
#include "core/text_util.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;

// Read messages by their text, process-wide: each entry is charged its text, about twice that
// for what was read, and the memo's entry and slots.
size_t MessageCharge(size_t text_bytes) { return 3 * text_bytes + 256; }
internal::TextMemo<ChatElement>& Messages() {
  static auto* memo = new internal::TextMemo<ChatElement>(kChatMessageMemoBytes, &MessageCharge);
  return *memo;  // never destroyed: used until exit
}

internal::TextMemo<ChatTools>& Tools() {
  static auto* memo = new internal::TextMemo<ChatTools>(kChatToolsMemoBytes, &MessageCharge);
  return *memo;  // never destroyed: used until exit
}

// Whether `part`, found at `depth` levels inside the body (a member of the body's object at 1, an
// element of its "messages" array at 2), keeps the whole body within kMaxJsonDepth: a body taken
// apart is checked part by part, each part when it is first parsed (the memos keep only parts
// that passed), instead of every byte of it on every request.
bool WithinDepth(std::string_view part, size_t depth) {
  return internal::CheckJsonDepth(part, "", internal::kMaxJsonDepth - depth).ok();
}

// The "tools" array of `body`, whose "messages" array is `messages`, parsed once per distinct
// text; null when the scan does not find one array (then the skeleton keeps "tools" as sent: not
// an array, given twice, a key with an escape), *failed when its text is not JSON or nests too
// deep. The messages' array is stepped over, not scanned again.
std::shared_ptr<const ChatTools> SplitTools(std::string_view body,
                                            const internal::JsonArraySplit& messages,
                                            std::pair<size_t, size_t>* range, bool* failed) {
  constexpr size_t npos = std::string_view::npos;
  int found = 0;  // "tools" keys, whatever their values
  bool array = false;
  const size_t open = internal::SkipJsonSpace(body, 0);
  if (open >= body.size() || body[open] != '{') return nullptr;
  const size_t end = internal::WalkJsonObject(
      body, open + 1, /*after_member=*/false, [&](std::string_view key, size_t value) -> size_t {
        if (value == messages.array_begin) return messages.array_end;
        if (key.find('\\') != npos) return npos;
        const size_t value_end = internal::SkipJsonValue(body, value);
        if (key == "tools") {
          ++found;
          array = value < body.size() && body[value] == '[';
          *range = {value, value_end};
        }
        return value_end;
      });
  if (end == npos || found != 1 || !array) return nullptr;
  const std::string_view text = body.substr(range->first, range->second - range->first);
  std::shared_ptr<const ChatTools> tools = Tools().Find(text);
  if (tools != nullptr) return tools;
  if (!WithinDepth(text, 1)) {
    *failed = true;
    return nullptr;
  }
  json value = json::parse(text.begin(), text.end(), nullptr, false);
  if (value.is_discarded()) {
    *failed = true;
    return nullptr;
  }
  tools = ChatTools::Of(std::move(value));
  Tools().Insert(text, tools);
  return tools;
}

}  // namespace

struct ChatBodyBase {
  std::string body;
  internal::JsonArraySplit split;  // of "messages"
  std::vector<std::shared_ptr<const ChatElement>> messages;
};

std::string_view ChatBodyBaseText(const ChatBodyBase& base) { return base.body; }

namespace {

// The body taken apart (see chat_body.h), continuing `previous`, which shares `prefix` bytes with
// it; false to parse it whole.
bool SplitBody(std::string_view body, const ChatBodyBase* previous, size_t prefix, ChatBody* out,
               internal::JsonArraySplit* split_out) {
  internal::JsonArraySplit& split = *split_out;
  if (!internal::SplitMemberArray(
          body, "messages", previous != nullptr ? &previous->split : nullptr, prefix, &split)) {
    return false;
  }
  const internal::JsonElements& elements = split.elements;
  std::pair<size_t, size_t> tools_range;
  bool tools_failed = false;
  out->tools = SplitTools(body, split, &tools_range, &tools_failed);
  if (tools_failed) return false;
  // The skeleton: the body with the arrays taken out written as [].
  std::vector<std::pair<size_t, size_t>> cut = {{split.array_begin, split.array_end}};
  if (out->tools != nullptr) cut.push_back(tools_range);
  std::sort(cut.begin(), cut.end());
  std::string skeleton;
  size_t at = 0;
  for (const auto& [begin, end] : cut) {
    skeleton.append(body.substr(at, begin - at)).append("[]");
    at = end;
  }
  skeleton.append(body.substr(at));
  if (!WithinDepth(skeleton, 0)) return false;
  out->fields = json::parse(skeleton, nullptr, false);
  if (out->fields.is_discarded() || !out->fields.is_object()) return false;
  internal::TextMemo<ChatElement>& memo = Messages();
  out->messages.reserve(elements.size());
  // The leading messages that end in the shared bytes are the previous body's.
  out->reused = split.reused;
  if (previous != nullptr) {
    out->messages.assign(previous->messages.begin(),
                         previous->messages.begin() + static_cast<std::ptrdiff_t>(split.reused));
  }
  for (size_t i = split.reused; i < elements.size(); ++i) {
    const auto& [from, to] = elements[i];
    const std::string_view text = body.substr(from, to - from);
    std::shared_ptr<const ChatElement> message = memo.Find(text);
    if (message == nullptr) {
      if (!WithinDepth(text, 2)) return false;
      auto parsed = std::make_shared<ChatElement>();
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

std::optional<ChatBody> ParseChatBody(std::string_view body,
                                      std::shared_ptr<const ChatBodyBase> previous,
                                      bool keep_base) {
  ChatBody out;
  internal::JsonArraySplit split;
  const size_t prefix = previous != nullptr ? internal::CommonPrefix(previous->body, body) : 0;
  if (SplitBody(body, previous.get(), prefix, &out, &split)) {
    if (keep_base) {
      auto base = std::make_shared<ChatBodyBase>();
      if (previous != nullptr && previous.use_count() == 1) {
        // Held by nothing else (made by make_shared, not const, taken out of ChatBodyBases): its
        // text's memory holds this one's, and only the bytes past what they share are written,
        // instead of a copy of the whole body (and the page faults of fresh memory) per request.
        base->body = std::move(const_cast<ChatBodyBase&>(*previous).body);
        base->body.resize(prefix);
        base->body.append(body.substr(prefix));
      } else {
        base->body = std::string(body);
      }
      base->split = std::move(split);
      base->messages = out.messages;
      out.base = std::move(base);
    }
    return out;
  }
  out = ChatBody();
  if (!WithinDepth(body, 0)) return std::nullopt;  // refused unparsed (ParseChatRequest says why)
  out.fields = json::parse(body.begin(), body.end(), nullptr, false);
  if (out.fields.is_discarded()) return std::nullopt;
  return out;
}

struct ChatBodyBases::State {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const ChatBodyBase>> bases;  // guarded by mu
  size_t bytes = 0;                                                            // guarded by mu
};

ChatBodyBases::ChatBodyBases() : state_(std::make_unique<State>()) {}
ChatBodyBases::~ChatBodyBases() = default;

std::shared_ptr<const ChatBodyBase> ChatBodyBases::Take(const std::string& conversation) {
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->bases.find(conversation);
  if (it == state_->bases.end()) return nullptr;
  std::shared_ptr<const ChatBodyBase> base = std::move(it->second);
  state_->bytes -= base->body.size();
  state_->bases.erase(it);
  return base;
}

void ChatBodyBases::Put(const std::string& conversation, std::shared_ptr<const ChatBodyBase> base) {
  const size_t bytes = base->body.size();
  if (bytes > kChatBodyBasesBytes / 4) return;
  std::lock_guard<std::mutex> lock(state_->mu);
  auto it = state_->bases.find(conversation);
  if (it != state_->bases.end()) {
    state_->bytes -= it->second->body.size();
    state_->bases.erase(it);
  }
  if (state_->bytes + bytes > kChatBodyBasesBytes) {
    state_->bases.clear();
    state_->bytes = 0;
  }
  state_->bases.emplace(conversation, std::move(base));
  state_->bytes += bytes;
}

}  // namespace strata::sidecar
