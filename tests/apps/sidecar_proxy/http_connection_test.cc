// CheckRequestHead (http_connection.h): request heads the sidecar's HTTP listener refuses before
// any route sees them (RFC 9112), each with its status and a message naming what was wrong. The
// same rules over real sockets: tests/integration/sidecar_proxy/http_connection_test.cc.
#include "http_connection.h"

#include <catch2/catch.hpp>
#include <string>

namespace strata::sidecar {
namespace {

using Catch::Matchers::Contains;

HeadVerdict Check(const std::string& fields,
                  const std::string& line = "POST /v1/chat/completions HTTP/1.1") {
  ConnectionLimits limits;
  limits.max_body_bytes = 1000;
  return CheckRequestHead(line + "\r\n" + fields + "\r\n", limits);
}

TEST_CASE("well-formed heads pass", "[sidecar][http]") {
  CHECK(Check("Host: x\r\nContent-Length: 12\r\n").status == 0);
  CHECK(Check("Host: x\r\nContent-Length: 12\r\nContent-Length: 12\r\n").status == 0);
  CHECK(Check("Host: x\r\nTransfer-Encoding: Chunked\r\n").status == 0);
  CHECK(Check("Authorization: Bearer t\r\nX-Empty:\r\n", "GET /healthz HTTP/1.0").status == 0);
  CHECK(Check("", "GET /healthz HTTP/1.1").status == 0);
}

TEST_CASE("framing that two parsers could read differently is refused with 400",
          "[sidecar][http]") {
  struct Case {
    std::string fields;
    std::string message;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"Content-Length: -1\r\n", "Content-Length \"-1\" is not a number of bytes"},
           {"Content-Length: 9e18\r\n", "Content-Length \"9e18\" is not a number of bytes"},
           {"Content-Length: 5, 5\r\n", "is not a number of bytes"},
           {"Content-Length: 5\r\nContent-Length: 6\r\n",
            "two different Content-Length values, \"5\" and \"6\""},
           {"Transfer-Encoding: chunked, identity\r\n",
            "Transfer-Encoding \"chunked, identity\" is not supported"},
           {"Transfer-Encoding: xchunked\r\nContent-Length: 3\r\n",
            "both Transfer-Encoding and Content-Length"},
           {"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n",
            "both Transfer-Encoding and Content-Length"},
           {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
            "more than one Transfer-Encoding"},
           {"X-A: b\r\n  folded\r\n", "starts with whitespace: folded header lines (obs-fold)"},
           {"Authorization: Bearer a\r\nAuthorization: Bearer b\r\n",
            "more than one authorization field"},
           {"Host: a\r\nHost: b\r\n", "more than one host field"},
           {"X-Strata-Agent: a\r\nx-strata-agent: b\r\n", "more than one x-strata-agent field"},
           {"Content-Length : 3\r\n", "the field name is not a token"},
           {"no colon here\r\n", "is not NAME: VALUE"},
           {"X-A: b\x01\r\n", "the value holds a control character"},
           {"X-A: b\nX-B: c\r\n", "a bare CR or LF"},
       }) {
    INFO(c.fields);
    const HeadVerdict v = Check(c.fields);
    CHECK(v.status == 400);
    CHECK(v.code == "invalid_argument");
    CHECK_THAT(v.message, Contains(c.message));
  }
  const HeadVerdict te10 =
      Check("Transfer-Encoding: chunked\r\n", "POST /v1/chat/completions HTTP/1.0");
  CHECK(te10.status == 400);
  CHECK_THAT(te10.message, Contains("HTTP/1.0"));
}

TEST_CASE("request lines, sizes and lengths get their own statuses", "[sidecar][http]") {
  const HeadVerdict big = Check("Content-Length: 1001\r\n");
  CHECK(big.status == 413);
  CHECK_THAT(big.message, Contains("Content-Length 1001 is above the sidecar's limit of 1000"));
  CHECK(Check("Content-Length: 99999999999999999999999\r\n").status == 413);
  const HeadVerdict long_url = Check("", "GET /" + std::string(9000, 'a') + " HTTP/1.1");
  CHECK(long_url.status == 414);
  CHECK(long_url.code == "uri_too_long");
  CHECK(Check("", "GET  /healthz HTTP/1.1").status == 400);
  CHECK(Check("", "GET /healthz HTTP/2.0").status == 400);
  CHECK(Check("", "GET /a\x7f HTTP/1.1").status == 400);
  ConnectionLimits limits;
  limits.max_head_bytes = 100;
  const HeadVerdict many =
      CheckRequestHead("GET / HTTP/1.1\r\nX-A: " + std::string(200, 'a') + "\r\n\r\n", limits);
  CHECK(many.status == 431);
  // A value is quoted printable, with other bytes escaped, and cut.
  const HeadVerdict quoted = Check("Content-Length: \xc3\xa9" + std::string(100, '9') + "\r\n");
  CHECK_THAT(quoted.message, Contains("\"\\xc3\\xa9999"));
  CHECK_THAT(quoted.message, Contains("...\""));
}

}  // namespace
}  // namespace strata::sidecar
