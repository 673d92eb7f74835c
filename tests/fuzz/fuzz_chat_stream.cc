// SSE framing and streamed chat.completion.chunk parsing, as the HTTP transport reads a streamed
// answer: the input is cut into network reads at each 0xFF byte; every complete event's data goes to
// ChatAssembler::AddJson until an error or [DONE]; then the answer is finished. Also checks that the
// framing does not depend on where the reads are cut: the same bytes fed at once give the same
// payloads.
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "transport/chat_parser.h"

namespace ti = strata::transport_internal;

namespace {

std::vector<std::string> Payloads(const std::vector<std::string_view>& reads) {
  ti::SseParser parser;
  std::vector<std::string> payloads;
  for (std::string_view read : reads) {
    strata::Status s = parser.Feed(read, [&](std::string_view payload) {
      payloads.emplace_back(payload);
      return strata::Status::Ok();
    });
    STRATA_FUZZ_CHECK(s.ok(), "SseParser::Feed failed although the callback never did");
  }
  return payloads;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = strata::fuzz::AsText(data, size);
  const std::vector<std::string_view> reads = strata::fuzz::Split(input, "\xff");
  std::string joined;
  for (std::string_view read : reads) joined.append(read);

  std::vector<std::string> payloads = Payloads(reads);
  STRATA_FUZZ_CHECK(payloads == Payloads({joined}), "SSE payloads depend on how the reads are cut");

  ti::ChatAssembler assembler;
  for (const std::string& payload : payloads) {
    if (payload == "[DONE]") break;
    strata::Status s = assembler.AddJson(payload);
    if (!s.ok()) {
      STRATA_FUZZ_CHECK(!s.message().empty(), "a refused chunk without a reason");
      break;
    }
  }
  strata::Response response;
  assembler.Finish(&response);
  return 0;
}
