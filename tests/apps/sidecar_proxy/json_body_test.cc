// DescribeJsonError (json_body.h): a body that is not JSON gets a message that says why.
#include "json_body.h"

#include <catch2/catch.hpp>
#include <string>

namespace strata::sidecar {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

TEST_CASE("a body that is not JSON is described precisely", "[sidecar][http]") {
  const std::string what = "the request body";
  CHECK_THAT(DescribeJsonError("{\"a\":\"\xc3\"}", what),
             StartsWith("the request body is not valid UTF-8: the byte 0xC3 at offset 6"));
  CHECK_THAT(DescribeJsonError("{\"a\":\"\\ud800\"}", what),
             Contains("surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF"));
  CHECK_THAT(DescribeJsonError("{\"a\":1e400}", what), Contains("number overflow parsing '1e400'"));
  CHECK_THAT(DescribeJsonError("{\"a\":", what),
             StartsWith("the request body is not valid JSON at byte 6: parse error"));
  CHECK(DescribeJsonError("{\"a\":[1,2]}", what).empty());
  // Its own text is always valid UTF-8, even when it quotes the body.
  const std::string quoted = DescribeJsonError("{\"\xc3\xa9\xc3\xa9\" 1}", what);
  CHECK(FirstInvalidUtf8(quoted) == std::string::npos);
}

TEST_CASE("FirstInvalidUtf8 finds overlong forms, surrogates and truncated characters",
          "[sidecar][http]") {
  CHECK(FirstInvalidUtf8("plain \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == std::string::npos);
  CHECK(FirstInvalidUtf8("ab\xc0\xaf") == 2);         // overlong '/'
  CHECK(FirstInvalidUtf8("\xed\xa0\x80") == 0);       // U+D800
  CHECK(FirstInvalidUtf8("x\xf4\x90\x80\x80") == 1);  // above U+10FFFF
  CHECK(FirstInvalidUtf8("xy\xe2\x82") == 2);         // cut short
  CHECK(FirstInvalidUtf8("\x80") == 0);               // a lone continuation byte
}

}  // namespace
}  // namespace strata::sidecar
