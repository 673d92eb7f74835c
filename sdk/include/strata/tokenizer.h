// strata/tokenizer.h — counting the tokens a model server will count.
//
// A Tokenizer turns text into token ids. strata uses it to size segments, layers and whole requests
// against a Budget. Implementations: a bytes-per-token estimator (built into strata::core, used when
// no model file is configured) and exact tokenizers (Hugging Face tokenizer.json byte-level BPE,
// SentencePiece) in strata::tokenize. A ChatTemplate turns a Chat Completions request into the
// prompt text the server tokenizes; a RequestTokenCounter counts a whole request through both. This
// header declares the three interfaces (strata::core); strata/tokenizer_spec.h (tokenizers made
// from a spec string) and strata/chat_template.h create the implementations.
//
//   std::unique_ptr<strata::Tokenizer> est = strata::MakeEstimateTokenizer(3.6);
//   size_t n = est->Count("hello world");
//
// Thread safety: every Tokenizer implementation is thread-safe; one instance may be shared by all
// contexts of a process.
#ifndef STRATA_TOKENIZER_H_
#define STRATA_TOKENIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/status.h"

namespace strata {

// Counts (and, when exact, encodes) tokens. Implementations: the estimator here, the exact
// tokenizers of strata/tokenizer_spec.h.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // A stable name that identifies the tokenizer and its configuration, e.g. "estimate:4" or
  // "hf-bpe:<sha256 of tokenizer.json>". Persisted with token counts it produced.
  virtual std::string Name() const = 0;

  // True when counts are approximations (the estimator); exact tokenizers return false.
  virtual bool IsEstimate() const = 0;

  // Token ids for `text` (valid UTF-8). The estimator returns an empty vector.
  virtual std::vector<int32_t> Encode(std::string_view text) const = 0;

  // Number of tokens of `text`. Exact tokenizers may do this faster than Encode().size().
  virtual size_t Count(std::string_view text) const = 0;
};

// A rendered prompt and where each message starts in it.
struct RenderedPrompt {
  std::string text;  // the prompt, as ChatTemplate::Render() returns it
  // message_offsets[i]: byte offset in `text` where messages[i] starts rendering. A message the
  // template renders nothing for (a `developer` message; a tool result rendered with the first
  // result of its run) gets the offset where the next rendered text begins.
  std::vector<size_t> message_offsets;
  // Bytes before the first message: the prefix, reasoning-effort line and tools block.
  size_t preamble_bytes = 0;
};

// The prompt text a server builds from a Chat Completions request (tokens = tokenizer(template(
// request))). Implementations: the templates of strata/chat_template.h (MakeChatTemplate), in
// strata::tokenize. The interface is strata::core's so that components take a template without
// linking the ones that implement it. Implementations are immutable and thread-safe.
class ChatTemplate {
 public:
  virtual ~ChatTemplate() = default;

  // Stable name and version, persisted with counts it produced, e.g. "glm-5.3:1".
  virtual std::string Name() const = 0;

  // The prompt text for `request_json` (a Chat Completions body). Special tokens appear as text
  // ("<|user|>"); an exact tokenizer whose file declares them as added tokens counts each as one
  // token. Errors: INVALID_ARGUMENT naming the offending field for a body that is not JSON, lacks
  // "messages", has an unknown role, content that is neither a string, null nor an array,
  // tool-call arguments that are not a JSON object, or JSON nested deeper than the template's
  // limit (strata/chat_template.h kChatTemplateMaxJsonDepth for strata's templates).
  virtual StatusOr<std::string> Render(std::string_view request_json) const = 0;

  // Render() plus the byte offset of each message. The default implementation leaves the offsets
  // empty; the GLM templates fill them. Errors as Render.
  virtual StatusOr<RenderedPrompt> RenderWithOffsets(std::string_view request_json) const;

  // Render()'s text, shared instead of copied: a template that keeps its renderings (strata's
  // templates keep their last ones, which the requests that continue them reuse) hands out the
  // kept text. The text never changes once returned. The default implementation wraps Render().
  // Errors as Render.
  virtual StatusOr<std::shared_ptr<const std::string>> RenderShared(
      std::string_view request_json) const;

  // Tokens the server adds that the rendered text does not show (the generic template's per-message
  // overhead). 0 for templates that render every token. Errors as Render.
  virtual StatusOr<size_t> OverheadTokens(std::string_view request_json) const = 0;
};

// Which render of a context a body is and what it is known to share with the context's render
// before it (BuiltRequest::render_serial, previous_render_serial, unchanged_bytes).
struct RenderContinuation {
  uint64_t render_serial = 0;           // this render's serial (never 0)
  uint64_t previous_render_serial = 0;  // the context's render before it (0: none)
  size_t unchanged_bytes = 0;  // leading bytes known to be that render's body's too
};

// Counts the input tokens of a whole rendered request (an OpenAI Chat Completions body) as the
// server will: through its chat template and tokenizer (strata/chat_template.h makes one). A
// Context given one (ContextOptions::request_counter) enforces its budget on exact counts.
// Implementations are thread-safe.
class RequestTokenCounter {
 public:
  virtual ~RequestTokenCounter() = default;
  // e.g. "glm-5.3:1+hf-bpe:<hash>".
  virtual std::string Name() const = 0;
  // Tokens of the prompt a server builds from the chat-completions body `request_body`;
  // INVALID_ARGUMENT when it is not one.
  virtual StatusOr<size_t> CountRequest(std::string_view request_body) const = 0;
  // The same count for a body a Context rendered (its Build and Preview call this), told which
  // render it is: a counter that counted the render before it may continue from the bytes they
  // share instead of comparing the two. By default CountRequest(request_body).
  virtual StatusOr<size_t> CountRendered(std::string_view request_body,
                                         const RenderContinuation& render) const {
    (void)render;
    return CountRequest(request_body);
  }
};

// An estimator that assumes `bytes_per_token` UTF-8 bytes per token (must be > 0; values <= 0 are
// replaced by 4.0). Count rounds up; an empty text has 0 tokens.
std::unique_ptr<Tokenizer> MakeEstimateTokenizer(double bytes_per_token = 4.0);

}  // namespace strata

#endif  // STRATA_TOKENIZER_H_
