// chat_body.h — a Chat Completions request body parsed as nlohmann::json parses it, its messages
// parsed and read (chat_message.h) once per distinct text (the HTTP proxy's first step).
//
// A client of the proxy sends its whole message list on every request, so a conversation's
// messages arrive again and again, byte for byte. ParseChatBody cuts the "messages" array into its
// elements with a light scan and parses and reads only the elements it has not seen before (a
// memo of recent message texts, process-wide and bounded); its "tools" array, sent again as well,
// is parsed once per distinct text the same way; the rest of the body is parsed as it is. Given the
// base an earlier body of the same conversation left (ChatBodyBases keeps them), the messages in
// the bytes the two bodies share are that body's, neither scanned nor looked up. A body the scan
// does not take apart (not an object, "messages" given twice, a key with an escape, an element
// that does not parse) is parsed whole, so results and errors are those of the whole parse.
//
// Thread safety: ParseChatBody may be called from any thread (the memos have their own locks); a
// base is immutable once made.
#ifndef STRATA_APPS_STRATA_SIDECAR_CHAT_BODY_H_
#define STRATA_APPS_STRATA_SIDECAR_CHAT_BODY_H_

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat_message.h"

namespace strata::sidecar {

// A request's "tools": the array the client sent, and each tool as Context::SetTools keeps it
// (nlohmann's compact dump), so that an agent's tools are compared with them without parsing.
struct ChatTools {
  nlohmann::json value = nlohmann::json::array();
  std::vector<std::string> dumps;  // one per element of `value`

  static std::shared_ptr<const ChatTools> Of(nlohmann::json value);
  static std::shared_ptr<const ChatTools> None();  // an empty array
};

// What ParseChatBody keeps of a body so that the next body of the same conversation, which starts
// with the same bytes, is taken apart from where the two differ (opaque; chat_body.cc).
struct ChatBodyBase;
// The body a base was made from.
std::string_view ChatBodyBaseText(const ChatBodyBase& base);

// The bases of recent bodies by conversation (the proxy's agent), each until the next body of that
// conversation takes it; bounded by the bytes of the bodies they hold (kChatBodyBasesBytes), past
// which they start over. Thread safety: any thread (one lock).
class ChatBodyBases {
 public:
  ChatBodyBases();
  ~ChatBodyBases();
  std::shared_ptr<const ChatBodyBase> Take(const std::string& conversation);
  void Put(const std::string& conversation, std::shared_ptr<const ChatBodyBase> base);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

struct ChatBody {
  // The body. When `split`, its "messages" is an empty array and the messages are in `messages`;
  // otherwise they are in fields["messages"], as parsed.
  nlohmann::json fields;
  bool split = false;
  std::vector<std::shared_ptr<const ChatElement>> messages;  // when `split`, in order
  // When `split` and "tools" is an array: the array, and fields["tools"] is an empty array.
  // Otherwise null, and "tools" is in `fields` as sent.
  std::shared_ptr<const ChatTools> tools;

  // When asked for and `split`: what the next body of the conversation is taken apart from.
  std::shared_ptr<const ChatBodyBase> base;
  // How many leading messages came from the previous body's base, not from the memo.
  size_t reused = 0;
};

// `body` parsed; nullopt when it is not JSON (nlohmann::json::parse discards it), or when it nests
// deeper than kMaxJsonDepth (core/json_text.h) and is not taken apart. With `previous` (the base
// of an earlier body of the conversation), the messages that end in the bytes the two bodies share
// are that body's, neither scanned nor looked up again. With `keep_base`, the result carries its
// own base (a copy of the body; when `previous` is held by nothing else, its text's memory is
// reused for it and only what differs is written). A body taken apart (`split`) is within
// kMaxJsonDepth: each part it parses (its skeleton, its tools, each message not seen before) is
// checked first, and a part that would take the body deeper makes it parsed whole instead; a caller
// checks the depth of a body that is not `split` before using its values (CheckJsonDepth), as the
// whole parse does not.
std::optional<ChatBody> ParseChatBody(std::string_view body,
                                      std::shared_ptr<const ChatBodyBase> previous = nullptr,
                                      bool keep_base = false);

// The bound of the tools memo, charged as the messages' memo.
inline constexpr size_t kChatToolsMemoBytes = 16u << 20;
// The bound of the bases ChatBodyBases keeps: the bytes of their bodies.
inline constexpr size_t kChatBodyBasesBytes = 128u << 20;

// The memo's bound: the charges of the messages it keeps (3 bytes per byte of text plus 256 per
// message: the text, what was read or parsed of it, the memo's entry), in bytes; it starts over
// past it.
inline constexpr size_t kChatMessageMemoBytes = 64u << 20;

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_CHAT_BODY_H_
