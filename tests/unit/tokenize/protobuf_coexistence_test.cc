// Regression test: Debian's libsentencepiece.so exports a bundled protobuf-lite. A process that
// links libprotobuf (gRPC: the CLI, strata-sim) and had libsentencepiece linked
// too crashed in protobuf's static initializers before main(). strata now loads libsentencepiece in
// isolation (dlopen RTLD_LOCAL | RTLD_DEEPBIND); this binary links libprotobuf and uses both.
#include <google/protobuf/stubs/common.h>

#include <catch2/catch.hpp>
#include <string>

#include "strata/tokenizer_spec.h"

TEST_CASE("the SentencePiece backend works in a process that also links libprotobuf",
          "[tokenize][spm]") {
  GOOGLE_PROTOBUF_VERIFY_VERSION;  // makes libprotobuf a real dependency of this binary
  auto tok = strata::MakeTokenizer(std::string("spm:") + STRATA_TOK_SPM_MODEL);
  if (!tok.ok()) FAIL(tok.status().ToString());
  std::vector<int32_t> ids = (*tok)->Encode("Hello, tokens! def f(x): return x");
  CHECK(ids.size() > 5);
  auto back = strata::Decode(**tok, ids);
  REQUIRE(back.ok());
  CHECK(*back == "Hello, tokens! def f(x): return x");
}
