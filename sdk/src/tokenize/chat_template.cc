// Chat templates: our own renderers of the GLM-5.3-Flash and GLM-4.7 chat_template.jinja files
// (zai-org, Hugging Face), producing what transformers' Jinja environment produces (trim_blocks +
// lstrip_blocks; `tojson` = Python json.dumps(ensure_ascii=False) with ", " and ": "), after vLLM's
// request preprocessing (tool-call "arguments" strings parsed into objects, null content as "",
// a message's "reasoning" as its "reasoning_content"). docs/templates.md lists every branch.
//
// Every JSON value walked here comes from text whose nesting was checked first (CheckJsonDepth),
// so the recursive walks below are bounded by kChatTemplateMaxJsonDepth.
#include "strata/chat_template.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/json_text.h"
#include "core/utf8.h"
#include "tokenize/exact_tokenizer.h"  // CommonPrefix
#include "tokenize/template_memo.h"

namespace strata {
namespace {

using ojson = nlohmann::ordered_json;
using internal::Utf8Prefix;  // quotes in messages end on a character boundary

// ---------------------------------------------------------------------------------------------
// Bounded JSON handling.

Status CheckNesting(std::string_view text, const std::string& what) {
  return internal::CheckJsonDepth(text, "chat template: " + what, kChatTemplateMaxJsonDepth);
}

// Python's repr of a float, from nlohmann's shortest round-trip digits: the two agree except that
// Python writes a decimal exponent of 16 digits in full ("1000000000000000.0", not "1e+15").
std::string PyFloat(const ojson& v) {
  std::string s = v.dump();
  size_t e = s.find('e');
  if (e == std::string::npos) return s;
  int exponent = std::atoi(s.c_str() + e + 1);
  if (exponent != 15) return s;
  std::string mantissa = s.substr(0, e);
  bool negative = !mantissa.empty() && mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits.push_back(c);
  digits.resize(16, '0');
  return (negative ? "-" : "") + digits + ".0";
}

void PyJsonString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(c));
          out->append(buf);
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

// Python json.dumps(value, ensure_ascii=False) with its default separators. `depth` bounds the
// recursion (the input was nesting-checked; this is the second line of defence).
Status PyJson(const ojson& v, std::string* out, size_t depth = 0) {
  if (depth > kChatTemplateMaxJsonDepth) {
    return InvalidArgumentError("chat template: JSON nested deeper than " +
                                std::to_string(kChatTemplateMaxJsonDepth) + " levels");
  }
  switch (v.type()) {
    case ojson::value_t::object: {
      out->push_back('{');
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out->append(", ");
        first = false;
        PyJsonString(it.key(), out);
        out->append(": ");
        STRATA_RETURN_IF_ERROR(PyJson(it.value(), out, depth + 1));
      }
      out->push_back('}');
      return Status::Ok();
    }
    case ojson::value_t::array: {
      out->push_back('[');
      bool first = true;
      for (const auto& e : v) {
        if (!first) out->append(", ");
        first = false;
        STRATA_RETURN_IF_ERROR(PyJson(e, out, depth + 1));
      }
      out->push_back(']');
      return Status::Ok();
    }
    case ojson::value_t::string:
      PyJsonString(v.get_ref<const std::string&>(), out);
      return Status::Ok();
    case ojson::value_t::boolean:
      out->append(v.get<bool>() ? "true" : "false");
      return Status::Ok();
    case ojson::value_t::null:
      out->append("null");
      return Status::Ok();
    case ojson::value_t::number_float:
      out->append(PyFloat(v));
      return Status::Ok();
    default:
      out->append(v.dump());  // integers
      return Status::Ok();
  }
}

// ---------------------------------------------------------------------------------------------
// Python string semantics.

// Decodes the UTF-8 code point at s[i] (length in *len); invalid bytes decode as themselves.
uint32_t CodePointAt(std::string_view s, size_t i, size_t* len) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (i + n > s.size()) n = 1;
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
  *len = n;
  return cp;
}

// Python's str.isspace(): Unicode White_Space plus the ASCII separators 0x1c-0x1f.
bool IsPySpace(uint32_t cp) {
  return cp == ' ' || (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x1f) || cp == 0x85 ||
         cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

// Python's str.strip() with no argument.
std::string PyStrip(std::string_view s) {
  size_t b = 0;
  while (b < s.size()) {
    size_t len;
    if (!IsPySpace(CodePointAt(s, b, &len))) break;
    b += len;
  }
  size_t e = s.size();
  while (e > b) {
    size_t start = e - 1;  // back up to the start of the last code point
    while (start > b && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80 && e - start < 4)
      --start;
    size_t len;
    uint32_t cp = CodePointAt(s, start, &len);
    if (start + len != e || !IsPySpace(cp)) break;
    e = start;
  }
  return std::string(s.substr(b, e - b));
}

std::string_view RStripChar(std::string_view s, char c) {
  while (!s.empty() && s.back() == c) s.remove_suffix(1);
  return s;
}

std::string_view LStripChar(std::string_view s, char c) {
  while (!s.empty() && s.front() == c) s.remove_prefix(1);
  return s;
}

// s.split(sep)[0] and s.split(sep)[-1].
std::string_view BeforeFirst(std::string_view s, std::string_view sep) {
  size_t at = s.find(sep);
  return at == std::string_view::npos ? s : s.substr(0, at);
}
std::string_view AfterLast(std::string_view s, std::string_view sep) {
  size_t at = s.rfind(sep);
  return at == std::string_view::npos ? s : s.substr(at + sep.size());
}

// Jinja truthiness of a JSON value (undefined/missing is false).
bool Truthy(const ojson* v) {
  if (v == nullptr) return false;
  switch (v->type()) {
    case ojson::value_t::null:
      return false;
    case ojson::value_t::boolean:
      return v->get<bool>();
    case ojson::value_t::string:
      return !v->get_ref<const std::string&>().empty();
    case ojson::value_t::array:
    case ojson::value_t::object:
      return !v->empty();
    case ojson::value_t::number_float:
      return v->get<double>() != 0.0;
    case ojson::value_t::number_integer:
    case ojson::value_t::number_unsigned:
      return v->get<int64_t>() != 0;
    default:
      return true;
  }
}

const ojson* Field(const ojson& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// What `{{ value }}` prints for a scalar (strings verbatim, numbers as Python prints them).
std::string ScalarText(const ojson& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  if (v.is_number_float()) return PyFloat(v);
  return v.dump();
}

// ---------------------------------------------------------------------------------------------
// The request as the template receives it.

// A request's messages, normalised (NormalizeMessage); shared with the message memo below and
// never changed once made.
class MessageList {
 public:
  size_t size() const { return items_.size(); }
  const ojson& operator[](size_t i) const { return *items_[i]; }
  const ojson* get(size_t i) const { return items_[i].get(); }
  void push_back(std::shared_ptr<const ojson> m) { items_.push_back(std::move(m)); }

 private:
  std::vector<std::shared_ptr<const ojson>> items_;
};

struct Request {
  MessageList messages;
  ojson tools = ojson::array();
  std::optional<std::string> reasoning_effort;  // nullopt: undefined
  std::optional<bool> enable_thinking;
  std::optional<bool> clear_thinking;
  std::optional<bool> add_generation_prompt;
};

std::string MessageWhere(size_t i) { return "messages[" + std::to_string(i) + "]"; }

StatusOr<std::optional<bool>> OptionalBool(const ojson& object, const char* key,
                                           const std::string& where) {
  const ojson* v = Field(object, key);
  if (v == nullptr || v->is_null()) return std::optional<bool>();
  if (!v->is_boolean())
    return InvalidArgumentError("chat template: " + where + "." + key +
                                " must be true or false, got " + Utf8Prefix(v->dump(), 40));
  return std::optional<bool>(v->get<bool>());
}

// A tool call's arguments as an object, as vLLM passes them to the template: a JSON string is
// parsed (json.loads), an empty or missing one is {}, an object is used as is.
StatusOr<ojson> NormalizeArguments(const ojson& function, const std::string& where) {
  const ojson* args = Field(function, "arguments");
  if (args == nullptr || args->is_null()) return ojson::object();
  if (args->is_object()) return *args;
  if (args->is_string()) {
    const std::string& text = args->get_ref<const std::string&>();
    if (text.empty()) return ojson::object();
    STRATA_RETURN_IF_ERROR(CheckNesting(text, where + ".arguments"));
    ojson parsed = ojson::parse(text, nullptr, false);
    if (!parsed.is_discarded() && parsed.is_object()) return parsed;
    return InvalidArgumentError("chat template: " + where +
                                ".arguments is not a JSON object: " + Utf8Prefix(text, 80));
  }
  return InvalidArgumentError("chat template: " + where +
                              ".arguments is neither a JSON string nor an object");
}

Status NormalizeMessage(ojson& m, size_t i) {
  const std::string where = MessageWhere(i);
  if (!m.is_object()) return InvalidArgumentError("chat template: " + where + " is not an object");
  const ojson* role_field = Field(m, "role");
  if (role_field == nullptr || !role_field->is_string())
    return InvalidArgumentError("chat template: " + where + " has no \"role\"");
  const std::string role = role_field->get<std::string>();
  if (role != "system" && role != "developer" && role != "user" && role != "assistant" &&
      role != "tool")
    return InvalidArgumentError("chat template: " + where + " has unknown role \"" + role +
                                "\" (expected system, developer, user, assistant or tool)");
  ojson& content = m["content"];
  if (content.is_null()) content = "";
  if (!content.is_string() && !content.is_array())
    return InvalidArgumentError("chat template: " + where +
                                ".content must be a string, an array of parts or null");
  if (role != "assistant") return Status::Ok();

  // vLLM: reasoning = message.get("reasoning") or message.get("reasoning_content").
  const ojson* reasoning = Field(m, "reasoning");
  const ojson* reasoning_content = Field(m, "reasoning_content");
  const ojson* chosen = Truthy(reasoning) ? reasoning : reasoning_content;
  if (chosen != nullptr && !chosen->is_null()) {
    if (!chosen->is_string())
      return InvalidArgumentError("chat template: " + where + " has a non-string reasoning");
    ojson text = *chosen;
    m["reasoning_content"] = std::move(text);
  } else {
    m.erase("reasoning_content");
  }

  ojson& calls = m["tool_calls"];
  if (calls.is_null()) return Status::Ok();
  if (!calls.is_array())
    return InvalidArgumentError("chat template: " + where + ".tool_calls must be an array");
  for (size_t c = 0; c < calls.size(); ++c) {
    const std::string call_where = where + ".tool_calls[" + std::to_string(c) + "]";
    ojson& call = calls[c];
    if (!call.is_object())
      return InvalidArgumentError("chat template: " + call_where + " is not an object");
    ojson& function = Truthy(Field(call, "function")) ? call["function"] : call;
    if (!function.is_object())
      return InvalidArgumentError("chat template: " + call_where + ".function is not an object");
    const ojson* name = Field(function, "name");
    if (name == nullptr || !name->is_string())
      return InvalidArgumentError("chat template: " + call_where + " has no function name");
    STRATA_ASSIGN_OR_RETURN(ojson args, NormalizeArguments(function, call_where + ".function"));
    function["arguments"] = std::move(args);
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Parsed bodies and the message memo. An agent's successive requests repeat their earlier
// messages byte for byte, so scanning, parsing and normalising every message of every request
// would make a run quadratic in its turns. ParseRequest continues the kept body that shares the
// longest prefix with the new one (ParsedBodies): the messages inside that prefix are taken as
// they are, and the rest of the "messages" array is cut into its elements' texts with a light
// scan; of those, only the elements the memo has not seen are parsed (and normalised). The rest of
// the body is parsed as a "skeleton" with an empty array. Whenever the scan meets anything unusual
// (not an object, a duplicate or escaped "messages" key, an element that does not parse, nesting
// near the limit) the whole body is parsed as before, so results and errors are those of the
// whole parse.

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t SkipSpace(std::string_view t, size_t i) {
  while (i < t.size() && IsJsonSpace(t[i])) ++i;
  return i;
}

// The end of the JSON string starting at t[pos] == '"', or npos.
size_t SkipString(std::string_view t, size_t pos) {
  for (size_t i = pos + 1; i < t.size(); ++i) {
    if (t[i] == '\\') {
      ++i;
    } else if (t[i] == '"') {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// The end of the value starting at t[pos] (not validated: nlohmann parses it later), or npos.
size_t SkipValue(std::string_view t, size_t pos) {
  if (pos >= t.size()) return std::string_view::npos;
  const char c = t[pos];
  if (c == '"') return SkipString(t, pos);
  if (c == '{' || c == '[') {
    size_t depth = 0;
    for (size_t i = pos; i < t.size(); ++i) {
      const char d = t[i];
      if (d == '"') {
        i = SkipString(t, i);
        if (i == std::string_view::npos) return i;
        --i;
      } else if (d == '{' || d == '[') {
        ++depth;
      } else if (d == '}' || d == ']') {
        if (--depth == 0) return i + 1;
      }
    }
    return std::string_view::npos;
  }
  size_t i = pos;
  while (i < t.size() && t[i] != ',' && t[i] != '}' && t[i] != ']' && !IsJsonSpace(t[i])) ++i;
  return i == pos ? std::string_view::npos : i;
}

// Where a body's "messages" array and each of its elements are: [begin, end) byte ranges.
struct BodySplit {
  size_t array_begin = 0;  // the '['
  size_t array_end = 0;    // one past the ']'
  std::vector<std::pair<size_t, size_t>> elements;
};

// Cuts the elements of an array from t[j]: just after its '[' (`after_element` false) or just
// after an element (true). Returns one past the array's ']', or npos.
size_t WalkElements(std::string_view t, size_t j, bool after_element,
                    std::vector<std::pair<size_t, size_t>>* elements) {
  constexpr size_t npos = std::string_view::npos;
  j = SkipSpace(t, j);
  if (j < t.size() && t[j] == ']') return j + 1;
  if (after_element) {
    if (j >= t.size() || t[j] != ',') return npos;
    j = SkipSpace(t, j + 1);
  }
  for (;;) {
    const size_t end = SkipValue(t, j);
    if (end == npos) return npos;
    elements->emplace_back(j, end);
    j = SkipSpace(t, end);
    if (j < t.size() && t[j] == ',') {
      j = SkipSpace(t, j + 1);
      continue;
    }
    return j < t.size() && t[j] == ']' ? j + 1 : npos;
  }
}

// Finds the body's top-level "messages" array and cuts it into its elements. With `base` (the
// split of an earlier body) and `prefix` (the bytes the two bodies share), the scan does not walk
// the shared part again: the keys before the array and the elements that end inside the prefix
// are the base's (a scalar's end depends on the byte after it, hence `<`).
bool SplitMessages(std::string_view t, const BodySplit* base, size_t prefix, BodySplit* out) {
  constexpr size_t npos = std::string_view::npos;
  size_t i = 0;
  bool seen = false;
  if (base != nullptr && base->array_begin < prefix) {
    out->array_begin = base->array_begin;
    size_t reused = 0;
    while (reused < base->elements.size() && base->elements[reused].second < prefix) ++reused;
    out->elements.assign(base->elements.begin(), base->elements.begin() + reused);
    i = WalkElements(t, reused > 0 ? out->elements.back().second : out->array_begin + 1, reused > 0,
                     &out->elements);
    if (i == npos) return false;
    out->array_end = i;
    seen = true;
  } else {
    i = SkipSpace(t, 0);
    if (i >= t.size() || t[i] != '{') return false;
    ++i;
  }
  for (bool first = !seen;; first = false) {
    i = SkipSpace(t, i);
    if (!first) {
      if (i < t.size() && t[i] == '}') break;
      if (i >= t.size() || t[i] != ',') return false;
      i = SkipSpace(t, i + 1);
    }
    if (i >= t.size() || t[i] != '"') return false;
    const size_t key_end = SkipString(t, i);
    if (key_end == npos) return false;
    const std::string_view key = t.substr(i, key_end - i);
    i = SkipSpace(t, key_end);
    if (i >= t.size() || t[i] != ':') return false;
    i = SkipSpace(t, i + 1);
    if (key == "\"messages\"") {
      if (seen || i >= t.size() || t[i] != '[') return false;
      seen = true;
      out->array_begin = i;
      i = WalkElements(t, i + 1, false, &out->elements);
      if (i == npos) return false;
      out->array_end = i;
    } else {
      i = SkipValue(t, i);
      if (i == npos) return false;
    }
  }
  return seen && SkipSpace(t, i + 1) == t.size();
}

// Normalised messages by their text, process-wide (the normalisation is the same for every
// template). Bounded: each entry is charged its text, about twice that for the parsed message and
// kMessageMemoEntryOverhead for the map's node and pointers (MessageMemoCharge); when the charges would exceed
// kMessageMemoMaxBytes it starts over. Charging the text alone let a long-running process (an agent
// host whose agents are created, run and deleted) keep several times the bound in parsed messages.
class MessageMemo {
 public:
  static MessageMemo& Get() {
    static MessageMemo* memo = new MessageMemo();  // never destroyed: used until exit
    return *memo;
  }

  std::shared_ptr<const ojson> Find(std::string_view text) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(text);
    return it == map_.end() ? nullptr : it->second->message;
  }

  void Insert(std::string_view text, std::shared_ptr<const ojson> message) {
    const size_t charge = tokenize_internal::MessageMemoCharge(text.size());
    if (charge > tokenize_internal::kMessageMemoMaxBytes / 4) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (map_.count(text) != 0) return;
    if (bytes_ + charge > tokenize_internal::kMessageMemoMaxBytes) {
      map_.clear();
      bytes_ = 0;
    }
    auto stored = std::make_unique<Stored>(Stored{std::string(text), std::move(message)});
    const std::string_view key = stored->text;
    map_.emplace(key, std::move(stored));
    bytes_ += charge;
  }

  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    map_.clear();
    bytes_ = 0;
  }

  tokenize_internal::MessageMemoStats Stats() {
    std::lock_guard<std::mutex> lock(mu_);
    tokenize_internal::MessageMemoStats stats;
    stats.entries = map_.size();
    stats.charged_bytes = bytes_;
    for (const auto& [key, stored] : map_) stats.text_bytes += key.size();
    return stats;
  }

 private:
  struct Stored {
    std::string text;
    std::shared_ptr<const ojson> message;
  };
  std::mutex mu_;
  std::unordered_map<std::string_view, std::unique_ptr<Stored>> map_;  // keys view Stored::text
  size_t bytes_ = 0;
};

// A body ParseRequest split and parsed: its text, where its messages are, the messages (parsed and
// normalised) and the rest of the body ("messages": []) parsed. Never changed once made.
struct ParsedBody {
  std::string text;
  BodySplit split;
  std::vector<std::shared_ptr<const ojson>> messages;
  std::string skeleton;
  std::shared_ptr<const ojson> skeleton_json;
};

// The most recent items of a memo (each with a `text`), most recent first, bounded by their number
// and the bytes of their texts. Thread-safe; the items are never changed once kept.
template <typename T>
class RecentList {
 public:
  RecentList(size_t max_items, size_t max_bytes) : max_items_(max_items), max_bytes_(max_bytes) {}

  std::vector<std::shared_ptr<const T>> Snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    return std::vector<std::shared_ptr<const T>>(items_.begin(), items_.end());
  }

  // Keeps `item` as the most recent, in place of `replaced` (an item it continues) when that is
  // given and still kept. An item over a quarter of the bytes allowed is not kept.
  void Keep(std::shared_ptr<const T> item, const T* replaced) {
    if (item->text.size() > max_bytes_ / 4) return;
    std::lock_guard<std::mutex> lock(mu_);
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

  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    items_.clear();
    bytes_ = 0;
  }

 private:
  const size_t max_items_;
  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::list<std::shared_ptr<const T>> items_;  // guarded by mu_
  size_t bytes_ = 0;                           // guarded by mu_
};

// The last bodies ParseRequest split, process-wide. A new body continues the one it shares the
// longest prefix with: an agent's successive requests (and the several renders of one request)
// repeat the previous body and add to its end, so the messages in the shared prefix are neither
// scanned, depth-checked, looked up nor parsed again, and a request costs its new bytes plus a
// comparison and a copy of its text. Bounded: 64 bodies, 256 MB of text.
RecentList<ParsedBody>& ParsedBodies() {
  static auto* bodies = new RecentList<ParsedBody>(64, 256u << 20);  // never destroyed
  return *bodies;
}

// The kept body sharing the longest prefix with `text` (null when none is kept) and the length of
// that prefix.
std::shared_ptr<const ParsedBody> ClosestBody(std::string_view text, size_t* prefix) {
  std::shared_ptr<const ParsedBody> best;
  *prefix = 0;
  for (auto& body : ParsedBodies().Snapshot()) {
    const size_t shared = tokenize_internal::CommonPrefix(body->text, text);
    if (best == nullptr || shared > *prefix) {
      best = std::move(body);
      *prefix = shared;
    }
  }
  return best;
}

// Splits and parses `text`, continuing `base` (the kept body it shares `prefix` bytes with, or
// null). Null when the light scan does not apply or any part of it fails (the whole body is
// parsed instead, for its result or its error); an error only from normalising a new message,
// which is the whole parse's error too: a body whose every part parses is valid JSON, and its
// nesting is the deeper of the skeleton's and 2 + each element's.
StatusOr<std::shared_ptr<const ParsedBody>> ParseSplit(std::string_view text,
                                                        const ParsedBody* base, size_t prefix) {
  auto body = std::make_shared<ParsedBody>();
  if (!SplitMessages(text, base != nullptr ? &base->split : nullptr, prefix, &body->split))
    return std::shared_ptr<const ParsedBody>();
  const BodySplit& split = body->split;
  // The leading elements SplitMessages took from the base (same range, ending inside the prefix).
  const size_t comparable =
      base != nullptr ? std::min(split.elements.size(), base->split.elements.size()) : 0;
  size_t same = 0;
  while (same < comparable && split.elements[same] == base->split.elements[same] &&
         split.elements[same].second < prefix)
    ++same;
  body->skeleton.reserve(text.size() - (split.array_end - split.array_begin) + 2);
  body->skeleton.append(text.substr(0, split.array_begin));
  body->skeleton.append("[]");
  body->skeleton.append(text.substr(split.array_end));
  if (!internal::CheckJsonDepth(body->skeleton, "", kChatTemplateMaxJsonDepth).ok())
    return std::shared_ptr<const ParsedBody>();
  for (size_t i = same; i < split.elements.size(); ++i) {
    const auto [begin, end] = split.elements[i];
    if (!internal::CheckJsonDepth(text.substr(begin, end - begin), "", kChatTemplateMaxJsonDepth - 2)
             .ok())
      return std::shared_ptr<const ParsedBody>();
  }
  if (base != nullptr && base->skeleton == body->skeleton) {
    body->skeleton_json = base->skeleton_json;
  } else {
    auto parsed = std::make_shared<ojson>(ojson::parse(body->skeleton, nullptr, false));
    if (parsed->is_discarded() || !parsed->is_object()) return std::shared_ptr<const ParsedBody>();
    body->skeleton_json = std::move(parsed);
  }
  // The messages: the base's, then from the memo or parsed; new ones are normalised in order
  // after every element parsed, so the first invalid message gives the whole parse's error.
  MessageMemo& memo = MessageMemo::Get();
  if (same > 0) body->messages.assign(base->messages.begin(), base->messages.begin() + same);
  std::vector<std::pair<size_t, ojson>> parsed;
  for (size_t i = same; i < split.elements.size(); ++i) {
    const std::string_view element =
        text.substr(split.elements[i].first, split.elements[i].second - split.elements[i].first);
    body->messages.push_back(memo.Find(element));
    if (body->messages.back() != nullptr) continue;
    ojson m = ojson::parse(element.begin(), element.end(), nullptr, false);
    if (m.is_discarded()) return std::shared_ptr<const ParsedBody>();
    parsed.emplace_back(i, std::move(m));
  }
  for (auto& [i, m] : parsed) {
    STRATA_RETURN_IF_ERROR(NormalizeMessage(m, i));
    body->messages[i] = std::make_shared<const ojson>(std::move(m));
    const auto [begin, end] = split.elements[i];
    memo.Insert(text.substr(begin, end - begin), body->messages[i]);
  }
  body->text.assign(text);
  return std::shared_ptr<const ParsedBody>(std::move(body));
}

// The request's fields other than its messages, from the parsed body.
Status ReadFields(const ojson& body, Request* r) {
  if (const ojson* tools = Field(body, "tools"); tools != nullptr && !tools->is_null()) {
    if (!tools->is_array())
      return InvalidArgumentError("chat template: \"tools\" must be an array");
    for (size_t t = 0; t < tools->size(); ++t)
      if (!(*tools)[t].is_object())
        return InvalidArgumentError("chat template: tools[" + std::to_string(t) +
                                    "] is not an object");
    r->tools = *tools;
  }
  const ojson* kwargs = Field(body, "chat_template_kwargs");
  if (kwargs != nullptr && !kwargs->is_null() && !kwargs->is_object())
    return InvalidArgumentError("chat template: \"chat_template_kwargs\" must be an object");
  static const ojson kEmpty = ojson::object();
  const ojson& kw = kwargs != nullptr && kwargs->is_object() ? *kwargs : kEmpty;
  STRATA_ASSIGN_OR_RETURN(r->enable_thinking,
                          OptionalBool(kw, "enable_thinking", "chat_template_kwargs"));
  STRATA_ASSIGN_OR_RETURN(r->clear_thinking,
                          OptionalBool(kw, "clear_thinking", "chat_template_kwargs"));
  STRATA_ASSIGN_OR_RETURN(r->add_generation_prompt,
                          OptionalBool(body, "add_generation_prompt", "the request"));
  // vLLM passes the top-level reasoning_effort over chat_template_kwargs' when it is set.
  for (const ojson* source : {Field(body, "reasoning_effort"), Field(kw, "reasoning_effort")}) {
    if (source == nullptr || source->is_null()) continue;
    if (!source->is_string())
      return InvalidArgumentError("chat template: reasoning_effort must be a string, got " +
                                  Utf8Prefix(source->dump(), 40));
    r->reasoning_effort = source->get<std::string>();
    break;
  }
  return Status::Ok();
}

StatusOr<Request> ParseRequest(std::string_view request_json) {
  Request r;
  size_t prefix = 0;
  std::shared_ptr<const ParsedBody> base = ClosestBody(request_json, &prefix);
  std::shared_ptr<const ParsedBody> split;
  if (base != nullptr && prefix == request_json.size() && prefix == base->text.size()) {
    split = base;  // the same body again
  } else {
    STRATA_ASSIGN_OR_RETURN(split, ParseSplit(request_json, base.get(), prefix));
  }
  if (split != nullptr) {
    // In place of the base when this body continues it (shares at least half of it).
    ParsedBodies().Keep(split, base != nullptr && prefix >= base->text.size() / 2 ? base.get() : nullptr);
    for (const auto& m : split->messages) r.messages.push_back(m);
    STRATA_RETURN_IF_ERROR(ReadFields(*split->skeleton_json, &r));
    return r;
  }
  // The whole body, parsed as one value.
  STRATA_RETURN_IF_ERROR(CheckNesting(request_json, "the request body"));
  ojson body = ojson::parse(request_json.begin(), request_json.end(), nullptr, false);
  if (body.is_discarded() || !body.is_object())
    return InvalidArgumentError("chat template: the request body is not a JSON object");
  if (!body.contains("messages") || !body["messages"].is_array())
    return InvalidArgumentError("chat template: the request body has no \"messages\" array");
  ojson& messages = body["messages"];
  for (size_t i = 0; i < messages.size(); ++i) {
    STRATA_RETURN_IF_ERROR(NormalizeMessage(messages[i], i));
    r.messages.push_back(std::make_shared<const ojson>(std::move(messages[i])));
  }
  STRATA_RETURN_IF_ERROR(ReadFields(body, &r));
  return r;
}

const std::string& Role(const ojson& m) { return m["role"].get_ref<const std::string&>(); }

// ---------------------------------------------------------------------------------------------
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
         a.add_generation_prompt == b.add_generation_prompt && a.tools == b.tools;
}

struct RenderedRequest {
  uint64_t renderer = 0;  // the template instance that rendered it (MemoRenderingTemplate::id_)
  Request request;
  std::string text;             // the preamble and the messages, without the template's ending
  std::vector<size_t> offsets;  // where each message starts in `text`
  size_t preamble_bytes = 0;
  int last_user = -1;  // index of the last user message, -1 when there is none
};

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

// A template rendered message by message, through the render memo.
class MemoRenderingTemplate : public ChatTemplate {
 public:
  StatusOr<std::string> Render(std::string_view request_json) const override {
    STRATA_ASSIGN_OR_RETURN(RenderedPrompt p, RenderWithOffsets(request_json));
    return std::move(p.text);
  }

  StatusOr<RenderedPrompt> RenderWithOffsets(std::string_view request_json) const override {
    STRATA_ASSIGN_OR_RETURN(Request r, ParseRequest(request_json));
    // The kept rendering with the same fields and the longest run of the same first messages.
    std::shared_ptr<const RenderedRequest> base;
    size_t same = 0;
    for (auto& kept : RenderedRequests().Snapshot()) {
      if (kept->renderer != id_ || !SameFields(kept->request, r)) continue;
      const size_t n = std::min(kept->request.messages.size(), r.messages.size());
      size_t k = 0;
      while (k < n && kept->request.messages.get(k) == r.messages.get(k)) ++k;
      if (base == nullptr || k > same) {
        base = std::move(kept);
        same = k;
      }
    }
    auto entry = std::make_shared<RenderedRequest>();
    entry->renderer = id_;
    entry->last_user = LastUser(r, base.get(), same);
    size_t from = 0;
    if (base != nullptr) {
      from = same;
      if (ReadsLastUser(r) && base->last_user != entry->last_user)
        from = std::min(from, static_cast<size_t>(std::min(base->last_user, entry->last_user) + 1));
      while (from > 0 && Role(r.messages[from - 1]) == "tool") --from;
      entry->text.assign(base->text, 0,
                         from < base->offsets.size() ? base->offsets[from] : base->text.size());
      entry->offsets.assign(base->offsets.begin(), base->offsets.begin() + from);
      entry->preamble_bytes = base->preamble_bytes;
    } else {
      STRATA_RETURN_IF_ERROR(RenderPreamble(r, &entry->text));
      entry->preamble_bytes = entry->text.size();
    }
    for (size_t i = from; i < r.messages.size(); ++i) {
      entry->offsets.push_back(entry->text.size());
      STRATA_RETURN_IF_ERROR(RenderMessage(r, i, entry->last_user, &entry->text));
    }
    RenderedPrompt p;
    p.text.reserve(entry->text.size() + 32);
    p.text = entry->text;
    RenderEnd(r, &p.text);
    p.message_offsets = entry->offsets;
    p.preamble_bytes = entry->preamble_bytes;
    entry->request = std::move(r);
    // In place of the base when this rendering continues it (reuses at least half of it).
    RenderedRequests().Keep(std::move(entry),
                   base != nullptr && from >= base->offsets.size() / 2 ? base.get() : nullptr);
    return p;
  }

 private:
  // Whether an assistant message's rendering depends on the index of the last user message.
  virtual bool ReadsLastUser(const Request& r) const = 0;
  // Everything before the first message.
  virtual Status RenderPreamble(const Request& r, std::string* out) const = 0;
  // Message i (`last_user`: the index of the last user message, -1 when there is none).
  virtual Status RenderMessage(const Request& r, size_t i, int last_user, std::string* out) const = 0;
  // Everything after the last message (the generation prompt).
  virtual void RenderEnd(const Request& r, std::string* out) const = 0;

  // Never reused, unlike an address: a kept rendering is continued by its own template only.
  const uint64_t id_ = [] {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1);
  }();
};

// The tool call's function object (`{%- if tc.function %}{%- set tc = tc.function %}`).
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

// ---------------------------------------------------------------------------------------------
// What the GLM templates share: the tools block's fixed text, and the prompt is the whole request
// (no tokens beyond it) rendered with offsets.

constexpr char kGlmToolsHeader[] =
    "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user "
    "query.\n\nYou are provided with function signatures within <tools></tools> XML "
    "tags:\n<tools>\n";
constexpr char kGlmToolsFooter[] =
    "</tools>\n\nFor each function call, output the function name and arguments within the "
    "following XML format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key>"
    "<arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>"
    "{arg-value-2}</arg_value>...</tool_call>";

class GlmChatTemplate : public MemoRenderingTemplate {
 public:
  StatusOr<size_t> OverheadTokens(std::string_view request_json) const override {
    STRATA_RETURN_IF_ERROR(ParseRequest(request_json).status());
    return size_t{0};
  }
};

// ---------------------------------------------------------------------------------------------
// GLM-5.3-Flash.

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
    if (!r.tools.empty()) {
      out += kGlmToolsHeader;
      for (const ojson& tool : r.tools) {
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
    if (r.tools.empty())
      return InvalidArgumentError(
          "chat template: a tool_reference result needs \"tools\" (the "
          "template defines that macro only with tools)");
    *out += "<tool_response><tools>\n";
    for (const ojson& ref : refs) {
      const ojson* ref_name = Field(ref, "name");
      for (const ojson& tool : r.tools) {
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
      *out += "<tool_response>" + c.get<std::string>() + "</tool_response>";
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

// ---------------------------------------------------------------------------------------------
// GLM-4.7.

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
    if (!r.tools.empty()) {
      out += kGlmToolsHeader;
      for (const ojson& tool : r.tools) {
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
          out += "<tool_response>" + c.get<std::string>() + "</tool_response>";
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

// ---------------------------------------------------------------------------------------------
// Generic.

class GenericChatTemplate final : public MemoRenderingTemplate {
 public:
  explicit GenericChatTemplate(GenericTemplateOptions options) : options_(options) {}

  std::string Name() const override {
    return "generic:" + std::to_string(options_.per_message_tokens) + "/" +
           std::to_string(options_.per_request_tokens);
  }

  StatusOr<size_t> OverheadTokens(std::string_view request_json) const override {
    STRATA_ASSIGN_OR_RETURN(Request r, ParseRequest(request_json));
    return options_.per_message_tokens * r.messages.size() + options_.per_request_tokens;
  }

 private:
  bool ReadsLastUser(const Request&) const override { return false; }

  Status RenderPreamble(const Request& r, std::string* out) const override {
    for (const ojson& tool : r.tools) {
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

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

namespace tokenize_internal {

void ClearChatTemplateMemos() {
  ParsedBodies().Clear();
  RenderedRequests().Clear();
  MessageMemo::Get().Clear();
}

MessageMemoStats ChatTemplateMessageMemoStats() { return MessageMemo::Get().Stats(); }

}  // namespace tokenize_internal

std::vector<std::string> ChatTemplateNames() { return {"glm-5.3", "glm-4.7", "generic"}; }

StatusOr<std::unique_ptr<ChatTemplate>> MakeChatTemplate(std::string_view name) {
  if (name == "glm-5.3" || name == "glm5") return MakeGlm5ChatTemplate();
  if (name == "glm-4.7") return MakeGlm47ChatTemplate();
  if (name == "generic") return MakeGenericChatTemplate();
  std::string known;
  for (const std::string& n : ChatTemplateNames()) known += (known.empty() ? "" : ", ") + n;
  return InvalidArgumentError("unknown chat template \"" + std::string(name) +
                              "\" (known: " + known + "; alias glm5 = glm-5.3)");
}

std::string DefaultChatTemplateName(std::string_view model) {
  std::string m = Lower(model);
  if (m.find("glm-5") != std::string::npos || m.find("glm5") != std::string::npos) return "glm-5.3";
  if (m.find("glm-4") != std::string::npos || m.find("glm4") != std::string::npos) return "glm-4.7";
  return "generic";
}

std::unique_ptr<ChatTemplate> MakeGlm5ChatTemplate(Glm5TemplateOptions options) {
  return std::make_unique<Glm53ChatTemplate>(options);
}

std::unique_ptr<ChatTemplate> MakeGlm47ChatTemplate(Glm5TemplateOptions options) {
  return std::make_unique<Glm47ChatTemplate>(options);
}

std::unique_ptr<ChatTemplate> MakeGenericChatTemplate(GenericTemplateOptions options) {
  return std::make_unique<GenericChatTemplate>(options);
}

StatusOr<RequestTokenCount> CountRequestTokens(const ChatTemplate& chat_template,
                                               const Tokenizer& tokenizer,
                                               std::string_view request_json) {
  STRATA_ASSIGN_OR_RETURN(std::string prompt, chat_template.Render(request_json));
  STRATA_ASSIGN_OR_RETURN(size_t overhead, chat_template.OverheadTokens(request_json));
  RequestTokenCount count;
  count.tokens = tokenizer.Count(prompt) + overhead;
  count.estimated = tokenizer.IsEstimate();
  return count;
}

}  // namespace strata
