// The exact request counter (strata/chat_template.h): chat template render, then an incremental
// count of the prompt (IncrementalEncoder, incremental.cc). An agent's successive requests repeat
// the previous prompt and add to its end, so counting each one whole would make a run quadratic in
// its turns; the counter keeps an encoder per recent prompt (several contexts may share one
// counter) and continues the one whose prompt shares the longest prefix with the new one.
#include <algorithm>
#include <list>
#include <string>
#include <utility>
#include <vector>

#include "core/thread_annotations.h"
#include "strata/chat_template.h"
#include "strata/tokenizer_spec.h"
#include "tokenize/exact_tokenizer.h"  // CommonPrefix

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
    STRATA_ASSIGN_OR_RETURN(std::string prompt, template_.Render(request_body));
    STRATA_ASSIGN_OR_RETURN(size_t overhead, template_.OverheadTokens(request_body));
    IncrementalEncoder encoder = TakeClosest(prompt);
    const size_t tokens = encoder.Count(prompt);
    Keep(std::move(encoder));
    return tokens + overhead;
  }

 private:
  // Removes and returns the kept encoder whose last prompt shares the longest prefix with
  // `prompt` (a new one when none is kept). Counting happens outside the lock, so threads sharing
  // the counter do not wait for each other's tokenization.
  IncrementalEncoder TakeClosest(std::string_view prompt) const {
    internal::MutexLock lock(mu_);
    auto best = kept_.end();
    size_t best_prefix = 0;
    for (auto it = kept_.begin(); it != kept_.end(); ++it) {
      const size_t prefix = tokenize_internal::CommonPrefix(it->text(), prompt);
      if (best == kept_.end() || prefix > best_prefix) {
        best = it;
        best_prefix = prefix;
      }
    }
    if (best == kept_.end()) return IncrementalEncoder(tokenizer_);
    IncrementalEncoder out = std::move(*best);
    kept_.erase(best);
    return out;
  }

  void Keep(IncrementalEncoder encoder) const {
    internal::MutexLock lock(mu_);
    kept_.push_front(std::move(encoder));
    if (kept_.size() > kKeptPrompts) kept_.pop_back();
  }

  const ChatTemplate& template_;
  const Tokenizer& tokenizer_;
  mutable internal::Mutex mu_;
  mutable std::list<IncrementalEncoder> kept_ STRATA_GUARDED_BY(mu_);  // most recent first
};

}  // namespace

std::unique_ptr<RequestTokenCounter> MakeRequestTokenCounter(const ChatTemplate& chat_template,
                                                             const Tokenizer& tokenizer) {
  return std::make_unique<TemplateRequestCounter>(chat_template, tokenizer);
}

}  // namespace strata
