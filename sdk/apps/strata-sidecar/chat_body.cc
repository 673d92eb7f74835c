// A Chat Completions body parsed with its messages memoized by text (chat_body.h).
#include "chat_body.h"

#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/json_scan.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;

// Parsed messages by their text, process-wide. Each entry is charged its text twice (the key and,
// about as much, the parsed value); past kChatMessageMemoBytes the memo starts over.
class MessageMemo {
 public:
  static MessageMemo& Get() {
    static MessageMemo* memo = new MessageMemo();  // never destroyed: used until exit
    return *memo;
  }

  std::shared_ptr<const json> Find(std::string_view text) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(std::string(text));
    return it == map_.end() ? nullptr : it->second;
  }

  void Insert(std::string_view text, std::shared_ptr<const json> message) {
    const size_t charge = 2 * text.size() + 64;
    if (charge > kChatMessageMemoBytes / 4) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes_ + charge > kChatMessageMemoBytes) {
      map_.clear();
      bytes_ = 0;
    }
    if (map_.emplace(std::string(text), std::move(message)).second) bytes_ += charge;
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const json>> map_;  // guarded by mu_
  size_t bytes_ = 0;                                                  // guarded by mu_
};

// Where the top-level "messages" array is: [begin, end) of its text, and its elements. False when
// the body is not an object the scan takes apart: no or two "messages" keys, a key with an escape
// (it might spell "messages"), a "messages" that is not an array, anything malformed.
bool FindMessages(std::string_view t, size_t* begin, size_t* end,
                  std::vector<std::pair<size_t, size_t>>* elements) {
  constexpr size_t npos = std::string_view::npos;
  size_t i = internal::SkipJsonSpace(t, 0);
  if (i >= t.size() || t[i] != '{') return false;
  bool seen = false;
  for (bool first = true;; first = false) {
    i = internal::SkipJsonSpace(t, i + (first ? 1 : 0));
    if (!first) {
      if (i < t.size() && t[i] == '}') return seen;
      if (i >= t.size() || t[i] != ',') return false;
      i = internal::SkipJsonSpace(t, i + 1);
    }
    if (i >= t.size() || t[i] != '"') return false;
    const size_t key_end = internal::SkipJsonString(t, i);
    if (key_end == npos) return false;
    const std::string_view key = t.substr(i, key_end - i);
    if (key.find('\\') != std::string_view::npos) return false;
    i = internal::SkipJsonSpace(t, key_end);
    if (i >= t.size() || t[i] != ':') return false;
    i = internal::SkipJsonSpace(t, i + 1);
    if (key == "\"messages\"") {
      if (seen || i >= t.size() || t[i] != '[') return false;
      seen = true;
      *begin = i;
      i = internal::SplitJsonArray(t, i + 1, false, elements);
      if (i == npos) return false;
      *end = i;
    } else {
      i = internal::SkipJsonValue(t, i);
      if (i == npos) return false;
    }
  }
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
  MessageMemo& memo = MessageMemo::Get();
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
