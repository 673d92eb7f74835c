#include "strata/chat_template.h"

namespace strata {
namespace {

class TemplateRequestCounter final : public RequestTokenCounter {
 public:
  TemplateRequestCounter(const ChatTemplate& chat_template, const Tokenizer& tokenizer)
      : template_(chat_template), tokenizer_(tokenizer) {}

  std::string Name() const override { return template_.Name() + "+" + tokenizer_.Name(); }

  StatusOr<size_t> CountRequest(std::string_view request_body) const override {
    STRATA_ASSIGN_OR_RETURN(RequestTokenCount count, CountRequestTokens(template_, tokenizer_, request_body));
    return count.tokens;
  }

 private:
  const ChatTemplate& template_;
  const Tokenizer& tokenizer_;
};

}  // namespace

std::unique_ptr<RequestTokenCounter> MakeRequestTokenCounter(const ChatTemplate& chat_template,
                                                             const Tokenizer& tokenizer) {
  return std::make_unique<TemplateRequestCounter>(chat_template, tokenizer);
}

}  // namespace strata
