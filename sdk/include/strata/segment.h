// strata/segment.h — the unit of context: layers, kinds, states and the Segment value type.
//
// A Context (strata/context.h) is an ordered list of Segments grouped into six Layers, rendered most
// stable first. Segments are created by Context operations; applications read them through
// Context::Segments() and Context::Find().
//
// Thread safety: plain value types.
#ifndef STRATA_SEGMENT_H_
#define STRATA_SEGMENT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

// Where a segment lives in the request. Rendered in this order, most stable first.
enum class Layer : int {
  kSystem = 0,    // system prompts; pinned
  kTools = 1,     // tool schemas (the request's `tools` array)
  kIndex = 2,     // repository indexes, API specs; versioned documents
  kDocs = 3,      // knowledge documents; versioned, declared order
  kHistory = 4,   // the conversation; append-only between compactions
  kVolatile = 5,  // per-request data; always the last message, never persisted into history
};
// The number of layers (the size of arrays indexed by Layer).
inline constexpr int kLayerCount = 6;

// What a segment holds; decides how it renders (role, fields).
enum class SegmentKind : int {
  kSystem = 0,
  kTools = 1,
  kIndex = 2,
  kDoc = 3,
  kUser = 4,
  kAssistant = 5,   // an assistant message without tool calls
  kToolCall = 6,    // an assistant message that carries tool calls
  kToolResult = 7,
  kErrorLog = 8,    // a tool result recognised as an error log (see HygieneOptions)
  kSummary = 9,
  kVolatile = 10,
};

// Whether a segment is rendered: live and masked ones are, evicted and summarized ones are not.
enum class SegmentState : int {
  kLive = 0,        // rendered as it was appended (after append-time hygiene)
  kMasked = 1,      // replaced by a placeholder; original recallable
  kSummarized = 2,  // folded into a summary segment; original recallable
  kEvicted = 3,     // no longer rendered; original recallable
};

// What append-time hygiene did to a tool result.
enum class HygieneAction : int {
  kNone = 0,
  kTruncated = 1,     // head and tail kept, middle cut; original recallable
  kDeduplicated = 2,  // identical to an earlier output; rendered as a reference
  kFolded = 3,        // error log folded; original recallable
};

// "system", "tools", "index", "docs", "history", "volatile".
std::string_view LayerName(Layer layer);
// "system", "tools", "index", "doc", "user", "assistant", "tool_call", "tool_result", "error_log",
// "summary", "volatile".
std::string_view SegmentKindName(SegmentKind kind);
std::string_view SegmentStateName(SegmentState state);     // e.g. "active"
std::string_view HygieneActionName(HygieneAction action);  // e.g. "truncated"
// Inverse of LayerName; std::nullopt for an unknown name.
std::optional<Layer> ParseLayer(std::string_view name);

// The recall id under which strata keeps an original: "r-" + the first 16 hex digits of its
// SHA-256. Equal originals share one id (and one stored copy).
std::string RecallIdFor(std::string_view original);

// One tool call made by the assistant, kept exactly as the server produced it.
struct ToolCall {
  std::string id;         // the server's tool_call id, e.g. "call_7"
  std::string name;       // function name
  std::string arguments;  // the arguments string, byte for byte; never re-serialized
};

// One unit of context: a system prompt, a tool schema, a document, a message or a summary.
struct Segment {
  std::string id;  // stable within its context: "s<seq>"
  uint64_t seq = 0;  // creation sequence number within the context, from 1
  // Render order within the layer: segments sort by (order, position, seq). History segments get
  // increasing positions on append; a summary takes the position of the first segment it replaces.
  int64_t position = 0;
  SegmentKind kind = SegmentKind::kUser;  // what it holds
  Layer layer = Layer::kHistory;          // where it renders
  // The text as rendered (after hygiene). For kTools: the canonical JSON of one tool schema.
  std::string content;
  std::string reasoning;             // assistant reasoning, if any
  std::vector<ToolCall> tool_calls;  // kToolCall only
  std::string tool_call_id;          // kToolResult / kErrorLog: the call this answers
  // Documents: the document name; tool results: the tool name; summaries: the "name@version" of the
  // Summarizer that wrote it ("" when the policy wrote it itself).
  std::string name;
  std::string version;               // documents: the version the application declared
  int64_t order = 0;                 // documents: the declared order key
  int64_t turn = 0;  // turn in which it was added (turn t starts with the t-th assistant message)
  size_t tokens = 0;  // tokens of the rendered content, counted by the context's tokenizer
  bool pinned = false;  // never edited by compaction; stable layers are always pinned
  SegmentState state = SegmentState::kLive;  // rendered when kLive or kMasked
  HygieneAction hygiene = HygieneAction::kNone;  // what append-time hygiene did to a tool result
  // Non-empty when the original content is kept in the recall store (Context::Recall).
  std::string recall_id;
  // kDeduplicated: the id of the tool call whose identical output this repeats.
  std::string duplicate_of;
  // "name@version" of the compaction policy that last altered (masked, summarized, evicted) or
  // produced (summaries) this segment; empty otherwise.
  std::string policy;
};

}  // namespace strata

#endif  // STRATA_SEGMENT_H_
