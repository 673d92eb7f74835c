// The request as a chat template receives it: the body parsed and normalised as vLLM does, and the
// memos that make a continued request cost its new bytes (chat_template_internal.h,
// template_memo.h).
#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/growing_text.h"
#include "core/json_scan.h"
#include "core/json_text.h"
#include "core/text_memo.h"
#include "core/text_util.h"  // CommonPrefix
#include "core/utf8.h"
#include "tokenize/chat_template_internal.h"
#include "tokenize/template_memo.h"

namespace strata::chat_template_internal {
namespace {

using internal::SkipJsonSpace;
using internal::SkipJsonValue;
using internal::Utf8Prefix;  // quotes in messages end on a character boundary

// ---------------------------------------------------------------------------------------------
// The request as the template receives it.

// The boolean `v` (the value of `key` in `where`; null when absent).
StatusOr<std::optional<bool>> OptionalBool(const ojson* v, const char* key,
                                           const std::string& where) {
  if (v == nullptr || v->is_null()) return std::optional<bool>();
  if (!v->is_boolean())
    return InvalidArgumentError("chat template: " + where + "." + key +
                                " must be true or false, got " + Utf8Prefix(v->dump(), 40));
  return std::optional<bool>(v->get<bool>());
}

StatusOr<std::optional<bool>> OptionalBool(const ojson& object, const char* key,
                                           const std::string& where) {
  return OptionalBool(Field(object, key), key, where);
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
// the body (the "skeleton", with an empty array) is cut into its fields, and only the fields whose
// text differs from the continued body's are parsed (BodyField). Whenever the scan meets anything
// unusual (not an object, a duplicate or escaped "messages" key, an element that does not parse,
// nesting near the limit) the whole body is parsed as before, so results and errors are those of
// the whole parse.

// The JSON string starting at t[*i] == '"' decoded into *out, *i moved past it; false for what
// only nlohmann decodes (a \u escape) or refuses (a control character, invalid UTF-8, no end).
bool DecodeSimpleString(std::string_view t, size_t* i, std::string* out) {
  size_t j = *i + 1;
  bool ascii = true;
  out->clear();
  for (;;) {
    size_t run = j;
    while (run < t.size()) {
      const unsigned char c = static_cast<unsigned char>(t[run]);
      if (c == '"' || c == '\\' || c < 0x20) break;
      if (c >= 0x80) ascii = false;
      ++run;
    }
    out->append(t.data() + j, run - j);
    if (run >= t.size() || static_cast<unsigned char>(t[run]) < 0x20) return false;
    if (t[run] == '"') {
      *i = run + 1;
      return ascii || internal::IsValidUtf8(*out);
    }
    if (run + 1 >= t.size()) return false;
    switch (t[run + 1]) {
      case '"': out->push_back('"'); break;
      case '\\': out->push_back('\\'); break;
      case '/': out->push_back('/'); break;
      case 'b': out->push_back('\b'); break;
      case 'f': out->push_back('\f'); break;
      case 'n': out->push_back('\n'); break;
      case 'r': out->push_back('\r'); break;
      case 't': out->push_back('\t'); break;
      default: return false;  // \u (nlohmann's surrogate rules) or an invalid escape
    }
    j = run + 2;
  }
}

}  // namespace

// A message whose every value is a string (as the context renders a tool result or a user
// message) parsed without nlohmann's lexer, which reads a long content byte by byte; nullopt for
// anything else, which the caller parses with nlohmann (so its result or its error stands). The
// object is what ojson::parse gives for the same text.
std::optional<ojson> ParseFlatStringObject(std::string_view t) {
  size_t i = SkipJsonSpace(t, 0);
  if (i >= t.size() || t[i] != '{') return std::nullopt;
  ojson object = ojson::object();
  std::string key;
  std::string value;
  i = SkipJsonSpace(t, i + 1);
  for (;;) {
    if (i >= t.size() || t[i] != '"' || !DecodeSimpleString(t, &i, &key)) return std::nullopt;
    i = SkipJsonSpace(t, i);
    if (i >= t.size() || t[i] != ':') return std::nullopt;
    i = SkipJsonSpace(t, i + 1);
    if (i >= t.size() || t[i] != '"' || !DecodeSimpleString(t, &i, &value)) return std::nullopt;
    if (object.contains(key)) return std::nullopt;  // a duplicate key: as nlohmann resolves it
    object.emplace(key, std::move(value));
    i = SkipJsonSpace(t, i);
    if (i < t.size() && t[i] == ',') {
      i = SkipJsonSpace(t, i + 1);
      continue;
    }
    if (i >= t.size() || t[i] != '}') return std::nullopt;
    return SkipJsonSpace(t, i + 1) == t.size() ? std::optional<ojson>(std::move(object))
                                               : std::nullopt;
  }
}

namespace {

// Normalised messages by their text, process-wide (the normalisation is the same for every
// template). Bounded: each entry is charged its text, about twice that for the parsed message and
// kMessageMemoEntryOverhead for the memo's entry and slots (MessageMemoCharge); when the charges
// would exceed kMessageMemoMaxBytes it starts over. Charging the text alone let a long-running
// process (an agent host whose agents are created, run and deleted) keep several times the bound
// in parsed messages.
using MessageMemo = internal::TextMemo<ojson>;
MessageMemo& Messages() {
  static auto* memo = new MessageMemo(tokenize_internal::kMessageMemoMaxBytes,
                                      &tokenize_internal::MessageMemoCharge);  // never destroyed
  return *memo;
}

uint64_t NextParsedBodyId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// One field of a body's skeleton: its name, where its value's text is in the skeleton, and the
// value parsed (shared with the body it continues when the text is the same).
struct BodyField {
  std::string key;
  size_t begin = 0;
  size_t end = 0;
  std::shared_ptr<const ojson> value;
};

// A body ParseRequest split and parsed: its text, where its messages are, the messages (parsed and
// normalised) and the rest of the body ("messages": []) cut into its fields, parsed. Never changed
// once made.
struct ParsedBody {
  // Never reused in the process (ContinuedBody::parsed_body names it).
  uint64_t id = NextParsedBodyId();
  // Grows by remapping its pages (core/growing_text.h): the bodies that continue it append in
  // place, without a copy of the whole text into fresh memory each time it outgrows its buffer.
  internal::GrowingText text;
  internal::JsonArraySplit split;  // where its "messages" array and its elements are
  MessageList messages;
  std::string skeleton;
  std::vector<BodyField> fields;  // in the skeleton's order, no name twice

  std::string_view FieldText(const BodyField& field) const {
    return std::string_view(skeleton).substr(field.begin, field.end - field.begin);
  }
  std::shared_ptr<const ojson> Field(std::string_view key) const {
    for (const BodyField& f : fields)
      if (f.key == key) return f.value;
    return nullptr;
  }
};

// Cuts body->skeleton into its fields and parses each value, taking the parse of `base`'s field of
// the same name when its text is the same: a request id that changes every request does not make
// the tools beside it be parsed again. False when the scan does not apply or a value does not
// parse (a key with a \u escape or given twice, a value nested too deep, anything malformed): the
// whole body is parsed instead, for its result or its error.
bool ParseFields(ParsedBody* body, const ParsedBody* base) {
  constexpr size_t npos = std::string_view::npos;
  const std::string_view t = body->skeleton;
  size_t i = SkipJsonSpace(t, 0);
  if (i >= t.size() || t[i] != '{') return false;
  i = SkipJsonSpace(t, i + 1);
  std::string key;
  for (;;) {
    if (i >= t.size() || t[i] != '"' || !DecodeSimpleString(t, &i, &key)) return false;
    if (body->Field(key) != nullptr) return false;  // a duplicate: as nlohmann resolves it
    i = SkipJsonSpace(t, i);
    if (i >= t.size() || t[i] != ':') return false;
    BodyField field{key, SkipJsonSpace(t, i + 1), 0, nullptr};
    field.end = SkipJsonValue(t, field.begin);
    if (field.end == npos) return false;
    const std::string_view text = body->FieldText(field);
    if (base != nullptr) {
      for (const BodyField& b : base->fields) {
        if (b.key == key && base->FieldText(b) == text) field.value = b.value;
      }
    }
    if (field.value == nullptr) {
      // The skeleton's own level is one: its fields may nest one less than a body.
      if (!internal::CheckJsonDepth(text, "", kChatTemplateMaxJsonDepth - 1).ok()) return false;
      auto parsed = std::make_shared<ojson>(ojson::parse(text.begin(), text.end(), nullptr, false));
      if (parsed->is_discarded()) return false;
      field.value = std::move(parsed);
    }
    body->fields.push_back(std::move(field));
    i = SkipJsonSpace(t, body->fields.back().end);
    if (i < t.size() && t[i] == ',') {
      i = SkipJsonSpace(t, i + 1);
      continue;
    }
    return i < t.size() && t[i] == '}' && SkipJsonSpace(t, i + 1) == t.size();
  }
}

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
// that prefix; the body `continued` names when it is still kept, compared only past the bytes it
// is known to share.
std::shared_ptr<const ParsedBody> ClosestBody(std::string_view text, size_t* prefix,
                                              const tokenize_internal::ContinuedBody* continued) {
  std::shared_ptr<const ParsedBody> best;
  *prefix = 0;
  std::vector<std::shared_ptr<const ParsedBody>> bodies = ParsedBodies().Snapshot();
  if (continued != nullptr && continued->parsed_body != 0) {
    for (auto& body : bodies) {
      if (body->id != continued->parsed_body) continue;
      const size_t known = std::min({continued->unchanged_bytes, body->text.size(), text.size()});
      *prefix = known + internal::CommonPrefix(body->text.view().substr(known), text.substr(known));
      return std::move(body);
    }
  }
  for (auto& body : bodies) {
    const size_t shared = internal::CommonPrefix(body->text.view(), text);
    if (best == nullptr || shared > *prefix) {
      best = std::move(body);
      *prefix = shared;
    }
    // No body can share more than all of `text` (the most recent first: the same body again is
    // usually the first one compared, and other agents' bodies, which may share long beginnings
    // with it, are not compared).
    if (*prefix == text.size()) break;
  }
  return best;
}

// Splits and parses `text`, continuing `base` (the kept body it shares `prefix` bytes with, or
// null). Null when the light scan does not apply or any part of it fails (the whole body is
// parsed instead, for its result or its error); an error only from normalising a new message,
// which is the whole parse's error too: a body whose every part parses is valid JSON, and its
// nesting is the deeper of the skeleton's and 2 + each element's.
StatusOr<std::shared_ptr<ParsedBody>> ParseSplit(std::string_view text, const ParsedBody* base,
                                                  size_t prefix) {
  auto body = std::make_shared<ParsedBody>();
  if (!internal::SplitMemberArray(text, "messages", base != nullptr ? &base->split : nullptr,
                                  prefix, &body->split))
    return std::shared_ptr<ParsedBody>();
  const internal::JsonArraySplit& split = body->split;
  const size_t same = split.reused;  // the base's messages, ending inside the prefix
  body->skeleton.reserve(text.size() - (split.array_end - split.array_begin) + 2);
  body->skeleton.append(text.substr(0, split.array_begin));
  body->skeleton.append("[]");
  body->skeleton.append(text.substr(split.array_end));
  if (base != nullptr && base->skeleton == body->skeleton) {
    body->fields = base->fields;
  } else if (!ParseFields(body.get(), base)) {
    return std::shared_ptr<ParsedBody>();
  }
  // The messages: the base's, then from the memo or parsed; new ones are normalised in order
  // after every element parsed, so the first invalid message gives the whole parse's error. Only
  // the elements the memo lacks are depth-checked: the memo keeps only texts that passed the
  // check, so after a compaction the messages past its boundary are looked up, not scanned again.
  MessageMemo& memo = Messages();
  MessageListBuilder messages(same > 0 ? &base->messages : nullptr, same);
  std::vector<std::pair<size_t, ojson>> parsed;
  for (size_t i = same; i < split.elements.size(); ++i) {
    const std::string_view element =
        text.substr(split.elements[i].first, split.elements[i].second - split.elements[i].first);
    messages.push_back(memo.Find(element));
    if (messages.own(i) != nullptr) continue;
    if (std::optional<ojson> flat = ParseFlatStringObject(element)) {  // nesting 1: no check
      parsed.emplace_back(i, std::move(*flat));
      continue;
    }
    if (!internal::CheckJsonDepth(element, "", kChatTemplateMaxJsonDepth - 2).ok())
      return std::shared_ptr<ParsedBody>();
    ojson m = ojson::parse(element.begin(), element.end(), nullptr, false);
    if (m.is_discarded()) return std::shared_ptr<ParsedBody>();
    parsed.emplace_back(i, std::move(m));
  }
  for (auto& [i, m] : parsed) {
    STRATA_RETURN_IF_ERROR(NormalizeMessage(m, i));
    messages.own(i) = std::make_shared<const ojson>(std::move(m));
    const auto [begin, end] = split.elements[i];
    memo.Insert(text.substr(begin, end - begin), messages.own(i));
  }
  body->messages = std::move(messages).Finish();
  return body;
}

// Gives `body` the text `text`. When `base` (the kept body `text` continues, sharing `prefix`
// bytes with it) is held by nobody else once taken out of the kept bodies, its text is reused:
// only the bytes from `prefix` on are written, instead of a copy of the whole body (and the page
// faults of a fresh buffer) on every request. `base` is released either way.
void KeepText(std::string_view text, std::shared_ptr<const ParsedBody> base, size_t prefix,
              ParsedBody* body) {
  std::shared_ptr<const ParsedBody> owned =
      base != nullptr ? ParsedBodies().Take(base.get()) : nullptr;
  base.reset();
  if (owned != nullptr && owned.use_count() == 1) {
    // Made non-const (make_shared<ParsedBody>) and seen by no one else: safe to take apart.
    internal::GrowingText& kept = const_cast<ParsedBody&>(*owned).text;
    body->text = std::move(kept);
    body->text.truncate(std::min(prefix, body->text.size()));
    const char* const memory = body->text.data();
    body->text.append(text.substr(body->text.size()));
    tokenize_internal::CountInPlace(/*render=*/false, /*moved=*/body->text.data() != memory);
    return;
  }
  body->text.append(text);  // the bodies that continue it append in place
}

// The request's fields other than its messages: `field(name)` gives each one parsed (null when
// the body has none).
template <typename FieldOf>
Status ReadFields(const FieldOf& field, Request* r) {
  if (std::shared_ptr<const ojson> tools = field("tools"); tools != nullptr && !tools->is_null()) {
    if (!tools->is_array())
      return InvalidArgumentError("chat template: \"tools\" must be an array");
    for (size_t t = 0; t < tools->size(); ++t)
      if (!(*tools)[t].is_object())
        return InvalidArgumentError("chat template: tools[" + std::to_string(t) +
                                    "] is not an object");
    r->tools = std::move(tools);
  }
  const std::shared_ptr<const ojson> kwargs_field = field("chat_template_kwargs");
  const ojson* kwargs = kwargs_field.get();
  if (kwargs != nullptr && !kwargs->is_null() && !kwargs->is_object())
    return InvalidArgumentError("chat template: \"chat_template_kwargs\" must be an object");
  static const ojson kEmpty = ojson::object();
  const ojson& kw = kwargs != nullptr && kwargs->is_object() ? *kwargs : kEmpty;
  STRATA_ASSIGN_OR_RETURN(r->enable_thinking,
                          OptionalBool(kw, "enable_thinking", "chat_template_kwargs"));
  STRATA_ASSIGN_OR_RETURN(r->clear_thinking,
                          OptionalBool(kw, "clear_thinking", "chat_template_kwargs"));
  const std::shared_ptr<const ojson> add_generation_prompt = field("add_generation_prompt");
  STRATA_ASSIGN_OR_RETURN(
      r->add_generation_prompt,
      OptionalBool(add_generation_prompt.get(), "add_generation_prompt", "the request"));
  // vLLM passes the top-level reasoning_effort over chat_template_kwargs' when it is set.
  const std::shared_ptr<const ojson> reasoning_effort = field("reasoning_effort");
  for (const ojson* source : {reasoning_effort.get(), Field(kw, "reasoning_effort")}) {
    if (source == nullptr || source->is_null()) continue;
    if (!source->is_string())
      return InvalidArgumentError("chat template: reasoning_effort must be a string, got " +
                                  Utf8Prefix(source->dump(), 40));
    r->reasoning_effort = source->get<std::string>();
    break;
  }
  return Status::Ok();
}

}  // namespace

const std::shared_ptr<const ojson>& EmptyTools() {
  static const auto* empty =
      new std::shared_ptr<const ojson>(std::make_shared<const ojson>(ojson::array()));
  return *empty;  // never destroyed: requests may outlive static destruction order
}

StatusOr<Request> ParseRequest(std::string_view request_json,
                               const tokenize_internal::ContinuedBody* continued,
                               uint64_t* parsed_body) {
  Request r;
  if (parsed_body != nullptr) *parsed_body = 0;
  size_t prefix = 0;
  std::shared_ptr<const ParsedBody> base = ClosestBody(request_json, &prefix, continued);
  std::shared_ptr<const ParsedBody> split;
  if (base != nullptr && prefix == request_json.size() && prefix == base->text.size()) {
    split = base;  // the same body again
    ParsedBodies().Keep(split, base.get());
  } else {
    STRATA_ASSIGN_OR_RETURN(std::shared_ptr<ParsedBody> parsed,
                            ParseSplit(request_json, base.get(), prefix));
    if (parsed != nullptr) {
      // In place of the base when this body continues it (shares at least half of it).
      const bool continues = base != nullptr && prefix >= base->text.size() / 2;
      KeepText(request_json, continues ? std::move(base) : nullptr, prefix, parsed.get());
      split = std::move(parsed);
      ParsedBodies().Keep(split, nullptr);
    }
  }
  if (split != nullptr) {
    if (parsed_body != nullptr) *parsed_body = split->id;
    r.messages = split->messages;
    const ParsedBody& parsed = *split;
    STRATA_RETURN_IF_ERROR(
        ReadFields([&parsed](const char* key) { return parsed.Field(key); }, &r));
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
  MessageListBuilder normalized(nullptr, 0);
  for (size_t i = 0; i < messages.size(); ++i) {
    STRATA_RETURN_IF_ERROR(NormalizeMessage(messages[i], i));
    normalized.push_back(std::make_shared<const ojson>(std::move(messages[i])));
  }
  r.messages = std::move(normalized).Finish();
  // Each field is read once: moved out of the body, which is not used after.
  const auto field = [&body](const char* key) -> std::shared_ptr<const ojson> {
    auto it = body.find(key);
    return it == body.end() ? nullptr : std::make_shared<const ojson>(std::move(*it));
  };
  STRATA_RETURN_IF_ERROR(ReadFields(field, &r));
  return r;
}

size_t MessageList::SharedPrefix(const MessageList& other) const {
  const size_t n = std::min(size(), other.size());
  if (SameList(other)) return n;
  size_t k = 0;
  for (size_t c = 0; k < n; ++c) {
    const Chunk& mine = *items_->chunks[c];
    const Chunk& theirs = *other.items_->chunks[c];
    if (&mine == &theirs) {
      k = std::min(n, k + mine.size());
      continue;
    }
    const size_t end = std::min(n, k + kChunk);
    for (size_t j = 0; k < end; ++j, ++k) {
      if (mine[j] != theirs[j]) return k;
    }
  }
  return k;
}

MessageListBuilder::MessageListBuilder(const MessageList* base, size_t keep) {
  if (base == nullptr || keep == 0) return;
  const auto& chunks = base->items_->chunks;
  const size_t whole = keep / MessageList::kChunk;
  items_->chunks.assign(chunks.begin(), chunks.begin() + static_cast<std::ptrdiff_t>(whole));
  first_own_ = whole;
  if (const size_t rest = keep % MessageList::kChunk; rest > 0) {
    const MessageList::Chunk& partial = *chunks[whole];
    auto chunk = std::make_shared<MessageList::Chunk>();
    chunk->reserve(MessageList::kChunk);
    chunk->assign(partial.begin(), partial.begin() + static_cast<std::ptrdiff_t>(rest));
    own_.push_back(chunk);
    items_->chunks.push_back(std::move(chunk));
  }
  items_->size = keep;
}

void MessageListBuilder::push_back(MessagePtr message) {
  if (items_->size % MessageList::kChunk == 0) {
    auto chunk = std::make_shared<MessageList::Chunk>();  // grows as pushed: lists are mostly short
    own_.push_back(chunk);
    items_->chunks.push_back(std::move(chunk));
  }
  own_.back()->push_back(std::move(message));
  ++items_->size;
}

MessagePtr& MessageListBuilder::own(size_t i) {
  return (*own_[i / MessageList::kChunk - first_own_])[i % MessageList::kChunk];
}

MessageList MessageListBuilder::Finish() && {
  MessageList list;
  list.items_ = std::move(items_);
  return list;
}

void ClearRequestMemos() {
  ParsedBodies().Clear();
  Messages().Clear();
}

}  // namespace strata::chat_template_internal

namespace strata::tokenize_internal {

MessageMemoStats ChatTemplateMessageMemoStats() {
  const auto stats = chat_template_internal::Messages().stats();
  return MessageMemoStats{stats.entries, stats.text_bytes, stats.charged_bytes};
}

}  // namespace strata::tokenize_internal
