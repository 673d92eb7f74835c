#include "transport/redact.h"

#include <catch2/catch.hpp>

#include "strata/transport.h"

namespace strata {
namespace {

using namespace transport_internal;

TEST_CASE("RedactUrl hides user:password@ and nothing else", "[transport]") {
  CHECK(RedactUrl("http://u:pw@host:8000/v1") == "http://[redacted]@host:8000/v1");
  CHECK(RedactUrl("https://token@api.example/v1?x=1") == "https://[redacted]@api.example/v1?x=1");
  CHECK(RedactUrl("http://u:p@ss@host/v1") ==
        "http://[redacted]@host/v1");  // '@' inside the password
  CHECK(RedactUrl("http://host:8000/v1/a@b") == "http://host:8000/v1/a@b");  // '@' in the path
  CHECK(RedactUrl("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1");
  CHECK(RedactUrl("host:50051") == "host:50051");
  CHECK(UrlPassword("http://u:p@ss@host/v1") == "p@ss");
  CHECK(UrlPassword("http://u@host/v1").empty());
}

TEST_CASE("loopback hosts", "[transport]") {
  CHECK(IsLoopbackUrl("http://127.0.0.1:1/v1"));
  CHECK(IsLoopbackUrl("http://u:p@localhost/v1"));
  CHECK(IsLoopbackUrl("http://[::1]:8000"));
  CHECK_FALSE(IsLoopbackUrl("http://127.0.0.1.example.com/v1"));
  CHECK_FALSE(IsLoopbackUrl("http://10.0.0.1/v1"));
  CHECK_FALSE(IsLoopbackUrl("http://[::2]/v1"));
}

TEST_CASE("headers with control characters are not valid, Scrub redacts auth lines and secrets",
          "[transport]") {
  CHECK(ValidHeader("X-A", "b\tc"));
  CHECK_FALSE(ValidHeader("X-A", "b\r\nX-B: c"));
  CHECK_FALSE(ValidHeader("X A", "b"));
  CHECK_FALSE(ValidHeader("", "b"));
  CHECK(Printable("a\r\nb") == "a\\x0d\\x0ab");
  std::string trace = "POST /v1 HTTP/1.1\r\nauthorization: Bearer sk-1\r\nX-Key: sk-1 again\r\n";
  CHECK(Scrub(trace, {"sk-1"}) ==
        "POST /v1 HTTP/1.1\r\nauthorization: [redacted]\r\nX-Key: [redacted] again\r\n");
}

TEST_CASE("UpstreamStatus redacts secrets and replaces invalid UTF-8 in an error's message",
          "[transport]") {
  const Status quoted = UnauthenticatedError(
      "HTTP 401: Incorrect API key provided: Bearer sk-live-1.\nAuthorization: Bearer sk-live-1\n"
      "bytes \xC3");
  const Status shown = UpstreamStatus(quoted, {"sk-live-1", ""});
  CHECK(shown.code() == StatusCode::kUnauthenticated);
  CHECK(shown.message() ==
        "HTTP 401: Incorrect API key provided: Bearer [redacted].\nAuthorization: [redacted]\n"
        "bytes \xEF\xBF\xBD");
  CHECK(UpstreamStatus(Status::Ok(), {"sk-live-1"}).ok());
  // Printable() cuts its 200 bytes on a character boundary.
  std::string long_name(199, 'n');
  CHECK(Printable(long_name + "\xC3\xA9") == long_name);
}

}  // namespace
}  // namespace strata
