// The chat templates on arbitrary request bodies: the first byte picks the template (GLM-5 with or
// without the reasoning-effort line and the generation prompt, or the generic template); the rest is
// the Chat Completions request JSON. Render, OverheadTokens and CountRequestTokens (estimator) must
// either succeed or refuse with a reason (valid UTF-8: a quote of the request must not cut a
// character), and agree with each other.
#include <memory>
#include <string>

#include "core/utf8.h"
#include "fuzz_util.h"
#include "strata/chat_template.h"
#include "strata/tokenizer_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::unique_ptr<strata::ChatTemplate> chat_template;
  // The first byte picks the template (glm-5.3, glm-4.7, generic) and the generation prompt.
  strata::Glm5TemplateOptions options;
  options.add_generation_prompt = (data[0] & 4) != 0;
  switch (data[0] & 3) {
    case 0:
    case 1: chat_template = strata::MakeGlm5ChatTemplate(options); break;
    case 2: chat_template = strata::MakeGlm47ChatTemplate(options); break;
    default: chat_template = strata::MakeGenericChatTemplate(); break;
  }
  const std::string_view request = strata::fuzz::AsText(data + 1, size - 1);
  auto rendered = chat_template->Render(request);
  if (!rendered.ok()) {
    STRATA_FUZZ_CHECK(!rendered.status().message().empty(), "a refused request without a reason");
    STRATA_FUZZ_CHECK(strata::internal::IsValidUtf8(rendered.status().message()),
                      "a refusal that is not valid UTF-8: " + rendered.status().message());
    return 0;
  }
  auto overhead = chat_template->OverheadTokens(request);
  STRATA_FUZZ_CHECK(overhead.ok(), "Render accepted a request OverheadTokens refused");
  static const std::unique_ptr<strata::Tokenizer> estimator =
      std::move(strata::MakeTokenizer("estimate:4")).value();
  auto counted = strata::CountRequestTokens(*chat_template, *estimator, request);
  STRATA_FUZZ_CHECK(counted.ok(), "Render accepted a request CountRequestTokens refused");
  STRATA_FUZZ_CHECK(counted->tokens == estimator->Count(*rendered) + *overhead,
                    "CountRequestTokens differs from Count(Render) + OverheadTokens");
  return 0;
}
