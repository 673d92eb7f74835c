// The exact request counter (strata/chat_template.h): chat template render, then an incremental
// count of the prompt (IncrementalEncoder, incremental.cc). An agent's successive requests repeat
// the previous prompt and add to its end, so counting each one whole would make a run quadratic in
// its turns; the counter keeps an encoder per recent prompt (several contexts may share one
// counter) and continues the one whose prompt the new one continues.
//
// strata's templates say which kept rendering a render continues and how many of its bytes it kept
// (tokenize_internal::SharedRender), and hand out their own text: the encoder holding that
// rendering continues from there without comparing those bytes again, and the prompt is neither
// copied nor parsed twice (the render's parse gives the overhead). A context's render
// (CountRendered) that follows one counted here is parsed from the bytes the context says the two
// share, without comparing them. Other templates' prompts are compared with each kept one.
#include <algorithm>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/text_util.h"  // CommonPrefix
#include "core/thread_annotations.h"
#include "strata/chat_template.h"
#include "strata/tokenizer_spec.h"
#include "tokenize/shared_render.h"

namespace strata {
namespace {

// How many recent prompts are kept (contexts that share one counter each continue their own).
constexpr size_t kKeptPrompts = 8;

class TemplateRequestCounter final : public RequestTokenCounter {
 public:
  TemplateRequestCounter(const ChatTemplate& chat_template, const Tokenizer& tokenizer)
      : template_(chat_template), tokenizer_(tokenizer) {}

  std::string Name() const override { return template_.Name() + "+" + tokenizer_.Name(); }

  StatusOr<size_t> CountRequest(std::string_view request_body) const override {
    return Count(request_body, nullptr);
  }

  // A context's render that follows one counted here is parsed from the bytes the context says
  // the two share, without comparing them.
  StatusOr<size_t> CountRendered(std::string_view request_body,
                                 const RenderContinuation& render) const override {
    return Count(request_body, &render);
  }

 private:
  // An encoder and the rendering whose text it holds (0: a text without a serial), the context's
  // render it counted (0: none) and that body's id in the template's memo.
  struct Kept {
    IncrementalEncoder encoder;
    uint64_t serial = 0;
    uint64_t context_render = 0;
    uint64_t parsed_body = 0;
  };

  StatusOr<size_t> Count(std::string_view request_body, const RenderContinuation* context) const {
    tokenize_internal::ContinuedBody continued;
    if (context != nullptr && context->previous_render_serial != 0) {
      continued = ContinuationOf(*context);
    }
    STRATA_ASSIGN_OR_RETURN(
        tokenize_internal::SharedRender render,
        tokenize_internal::RenderSharedWithOverhead(
            template_, request_body, continued.parsed_body != 0 ? &continued : nullptr));
    size_t overhead = 0;
    if (render.overhead_tokens) {
      overhead = *render.overhead_tokens;
    } else {
      STRATA_ASSIGN_OR_RETURN(overhead, template_.OverheadTokens(request_body));
    }
    const std::string& prompt = *render.text;
    size_t known = 0;
    Kept kept = TakeClosest(render, &known);
    const size_t tokens = kept.encoder.Count(prompt, known);
    kept.serial = render.serial;
    kept.context_render = context != nullptr ? context->render_serial : 0;
    kept.parsed_body = render.parsed_body;
    Keep(std::move(kept));
    return tokens + overhead;
  }

  // What the body of `context` is known to share with the body of the render before it, when
  // that one was counted here.
  tokenize_internal::ContinuedBody ContinuationOf(const RenderContinuation& context) const {
    internal::MutexLock lock(mu_);
    for (const Kept& kept : kept_) {
      if (kept.context_render == context.previous_render_serial) {
        return {kept.parsed_body, context.unchanged_bytes};
      }
    }
    return {};
  }

  // Removes and returns the kept encoder the render continues: the one holding the rendering it
  // continues (or the same rendering), else the one whose text shares the longest prefix with the
  // prompt; a new one when none is kept. *known: leading bytes of the prompt the encoder's text is
  // known to share (not compared again). Counting happens outside the lock, so threads sharing the
  // counter do not wait for each other's tokenization.
  Kept TakeClosest(const tokenize_internal::SharedRender& render, size_t* known) const {
    const std::string& prompt = *render.text;
    internal::MutexLock lock(mu_);
    auto best = kept_.end();
    size_t best_prefix = 0;
    for (auto it = kept_.begin(); it != kept_.end(); ++it) {
      if (std::optional<size_t> kept = tokenize_internal::KnownPrefixOf(render, it->serial)) {
        best = it;
        best_prefix = *kept;
        break;
      }
    }
    if (best == kept_.end()) {
      for (auto it = kept_.begin(); it != kept_.end(); ++it) {
        const size_t prefix = internal::CommonPrefix(it->encoder.text(), prompt);
        if (best == kept_.end() || prefix > best_prefix) {
          best = it;
          best_prefix = prefix;
        }
      }
    }
    if (best == kept_.end()) {
      *known = 0;
      return Kept{IncrementalEncoder(tokenizer_), 0, 0, 0};
    }
    *known = best_prefix;
    Kept out = std::move(*best);
    kept_.erase(best);
    return out;
  }

  void Keep(Kept kept) const {
    internal::MutexLock lock(mu_);
    kept_.push_front(std::move(kept));
    if (kept_.size() > kKeptPrompts) kept_.pop_back();
  }

  const ChatTemplate& template_;
  const Tokenizer& tokenizer_;
  mutable internal::Mutex mu_;
  mutable std::list<Kept> kept_ STRATA_GUARDED_BY(mu_);  // most recent first
};

}  // namespace

std::unique_ptr<RequestTokenCounter> MakeRequestTokenCounter(const ChatTemplate& chat_template,
                                                             const Tokenizer& tokenizer) {
  return std::make_unique<TemplateRequestCounter>(chat_template, tokenizer);
}

}  // namespace strata
