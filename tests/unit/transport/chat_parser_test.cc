#include "transport/chat_parser.h"

#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <vector>

#include "core/utf8.h"
#include "transport/retry.h"

namespace strata::transport_internal {
namespace {

TEST_CASE("SSE framing: events split anywhere across feeds, LF or CRLF, multi-line data", "[transport]") {
  std::string stream = "data: one\n\n: comment\n\ndata: two\r\n\r\nevent: x\ndata: a\ndata: b\n\ndata: [DONE]\n\n";
  for (size_t split = 0; split <= stream.size(); ++split) {
    SseParser parser;
    std::vector<std::string> got;
    auto on = [&](std::string_view d) {
      got.emplace_back(d);
      return Status();
    };
    REQUIRE(parser.Feed(stream.substr(0, split), on).ok());
    REQUIRE(parser.Feed(stream.substr(split), on).ok());
    REQUIRE(got == std::vector<std::string>{"one", "two", "a\nb", "[DONE]"});
  }
}

TEST_CASE("tool-call deltas are assembled by index, reasoning from either field", "[transport]") {
  ChatAssembler a;
  REQUIRE(a.AddJson(R"({"id":"c1","model":"m","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"th"}}]})").ok());
  REQUIRE(a.AddJson(R"({"choices":[{"index":0,"delta":{"reasoning":"ink"}}]})").ok());
  REQUIRE(a.AddJson(R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","function":{"name":"ls","arguments":""}}]}}]})").ok());
  REQUIRE(a.AddJson(R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"bash","arguments":"{\"cm"}}]}}]})").ok());
  REQUIRE(a.AddJson(R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}}]})").ok());
  REQUIRE(a.AddJson(R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"d\":\"ls\"}"}}]}}]})").ok());
  REQUIRE(a.AddJson(R"({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]})").ok());
  REQUIRE(a.AddJson(R"({"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13,"prompt_tokens_details":null}})").ok());
  Response r;
  a.Finish(&r);
  CHECK(r.id == "c1");
  CHECK(r.reasoning == "think");
  REQUIRE(r.tool_calls.size() == 2);
  CHECK(r.tool_calls[0].id == "call_a");
  CHECK(r.tool_calls[0].name == "bash");
  CHECK(r.tool_calls[0].arguments == R"({"cmd":"ls"})");
  CHECK(r.tool_calls[1].id == "call_b");
  CHECK(r.tool_calls[1].arguments == "{}");
  CHECK(r.finish_reason == "tool_calls");
  CHECK(r.usage.reported);
  CHECK(r.usage.prompt_tokens == 10);
  CHECK_FALSE(r.usage.cached_tokens.has_value());
}

TEST_CASE("the fragments of one pass are handed on one behind and say whether another follows",
          "[transport]") {
  std::vector<StreamDelta> got;
  std::function<void(const StreamDelta&)> on = [&](const StreamDelta& d) { got.push_back(d); };
  ChatAssembler a;
  a.set_on_delta(&on);
  auto chunk = [](const std::string& delta) {
    return R"({"choices":[{"index":0,"delta":)" + delta + "}]}";
  };
  // Outside a pass each fragment goes at once and says nothing follows.
  REQUIRE(a.AddJson(chunk(R"({"content":"a"})")).ok());
  REQUIRE(got.size() == 1);
  CHECK_FALSE(got[0].more_follows);

  a.BeginRead();
  REQUIRE(a.AddJson(chunk(R"({"reasoning_content":"r","content":"b"})")).ok());
  CHECK(got.size() == 2);  // the reasoning went on once the content followed it; "b" is held
  REQUIRE(
      a
          .AddJson(chunk(
              R"({"tool_calls":[{"index":0,"id":"c1","function":{"name":"ls","arguments":"{"}}]})"))
          .ok());
  REQUIRE(a.AddJson(R"({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]})").ok());
  CHECK(got.size() == 3);
  a.EndRead();
  REQUIRE(got.size() == 4);
  CHECK(got[1].kind == StreamDelta::Kind::kReasoning);
  CHECK(got[1].more_follows);
  CHECK(got[2].text == "b");
  CHECK(got[2].more_follows);
  CHECK(got[3].kind == StreamDelta::Kind::kToolCallArguments);
  CHECK(got[3].text == "{");
  CHECK(got[3].tool_call_id == "c1");
  CHECK_FALSE(got[3].more_follows);  // the last of the pass

  // A pass that brought no fragment hands nothing on; the next pass starts afresh.
  a.BeginRead();
  a.EndRead();
  CHECK(got.size() == 4);
  a.BeginRead();
  REQUIRE(a.AddJson(chunk(R"({"content":"c"})")).ok());
  a.EndRead();
  REQUIRE(got.size() == 5);
  CHECK_FALSE(got[4].more_follows);
  Response r;
  a.Finish(&r);
  CHECK(r.content == "abc");
}

TEST_CASE("reasoning tokens from completion_tokens_details or SGLang's top-level field", "[transport]") {
  ChatAssembler a;
  REQUIRE(a.AddJson(R"({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9,"reasoning_tokens":7}})").ok());
  Response r;
  a.Finish(&r);
  CHECK(r.usage.reasoning_tokens == 7);
  ChatAssembler b;
  REQUIRE(b.AddJson(R"({"choices":[],"usage":{"completion_tokens":9,"completion_tokens_details":{"reasoning_tokens":4}}})").ok());
  b.Finish(&r);
  CHECK(r.usage.reasoning_tokens == 4);
}

TEST_CASE("usage figures a server could not mean are recorded as absent", "[transport]") {
  ChatAssembler a;
  REQUIRE(a.AddJson(R"({"choices":[],"usage":{"prompt_tokens":1e300,"completion_tokens":-5,"total_tokens":2.5,
      "prompt_tokens_details":{"cached_tokens":1e300},"reasoning_tokens":"7"}})").ok());
  Response r;
  a.Finish(&r);
  CHECK(r.usage.reported);
  CHECK(r.usage.prompt_tokens == 0);
  CHECK(r.usage.completion_tokens == 0);
  CHECK(r.usage.total_tokens == 0);
  CHECK_FALSE(r.usage.cached_tokens.has_value());
  CHECK(r.usage.reasoning_tokens == 0);
  ChatAssembler b;  // more cached than prompt tokens; a float that is integral is fine
  REQUIRE(b.AddJson(R"({"choices":[],"usage":{"prompt_tokens":10.0,"prompt_tokens_details":{"cached_tokens":11}}})").ok());
  b.Finish(&r);
  CHECK(r.usage.prompt_tokens == 10);
  CHECK_FALSE(r.usage.cached_tokens.has_value());
  ChatAssembler c;  // an error code far out of range is not an HTTP status
  Status s = c.AddJson(R"({"error":{"message":"m","code":99999999999}})");
  CHECK(s.code() == StatusCode::kUnavailable);
}

TEST_CASE("usage cached_tokens: absent, null and present", "[transport]") {
  auto parse = [](const std::string& usage) {
    ChatAssembler a;
    REQUIRE(a.AddJson(R"({"choices":[{"index":0,"message":{"content":"x"},"finish_reason":"stop"}],"usage":)" + usage + "}").ok());
    Response r;
    a.Finish(&r);
    return r.usage.cached_tokens;
  };
  CHECK_FALSE(parse(R"({"prompt_tokens":5})").has_value());
  CHECK_FALSE(parse(R"({"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":null}})").has_value());
  CHECK_FALSE(parse(R"({"prompt_tokens":5,"prompt_tokens_details":null})").has_value());
  CHECK(parse(R"({"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":0}})") == 0);
  CHECK(parse(R"({"prompt_tokens":50,"prompt_tokens_details":{"cached_tokens":32}})") == 32);
}

TEST_CASE("both error shapes give the server's message, status codes map to canonical codes", "[transport]") {
  CHECK(ErrorMessageFromBody(R"({"error":{"message":"bad thing","type":"x","code":400}})") == "bad thing");
  CHECK(ErrorMessageFromBody(R"({"object":"error","message":"flat thing","type":"BadRequestError","code":400})") == "flat thing");
  CHECK(ErrorMessageFromBody("plain text\n") == "plain text");
  CHECK(StatusFromHttp(400, R"({"message":"This model's maximum context length is 100 tokens."})").code() ==
        StatusCode::kResourceExhausted);
  CHECK(StatusFromHttp(400, R"({"message":"bad role"})").code() == StatusCode::kInvalidArgument);
  CHECK(StatusFromHttp(401, "").code() == StatusCode::kUnauthenticated);
  CHECK(StatusFromHttp(404, "").code() == StatusCode::kNotFound);
  CHECK(StatusFromHttp(429, "").code() == StatusCode::kResourceExhausted);
  CHECK(StatusFromHttp(503, "").code() == StatusCode::kUnavailable);
  Status s = StatusFromHttp(500, R"({"error":{"message":"boom"}})");
  CHECK(s.message().find("boom") != std::string::npos);
  // An error object inside a stream.
  ChatAssembler a;
  Status in_stream = a.AddJson(R"({"object":"error","message":"overloaded","code":503})");
  CHECK(in_stream.code() == StatusCode::kUnavailable);
  CHECK(in_stream.message().find("overloaded") != std::string::npos);
  CHECK(a.AddJson("{not json").code() == StatusCode::kDataLoss);
}

TEST_CASE("error bodies that are not JSON are quoted cut on a character and as valid UTF-8",
          "[transport]") {
  std::string e_acute_400 = "x";
  for (int i = 0; i < 400; ++i) e_acute_400 += "\xC3\xA9";
  // 300 bytes would end on the first byte of the 150th character: 149 are quoted.
  const std::string quoted = ErrorMessageFromBody(e_acute_400);
  CHECK(quoted == e_acute_400.substr(0, 299));
  CHECK(internal::IsValidUtf8(StatusFromHttp(400, e_acute_400).message()));
  // Garbage: each invalid byte becomes U+FFFD.
  CHECK(ErrorMessageFromBody("\xFF<\x80>") == "\xEF\xBF\xBD<\xEF\xBF\xBD>");
  ChatAssembler a;
  Status garbage = a.AddJson("\xFE\xFF" + std::string(200, '\x80'));
  CHECK(garbage.code() == StatusCode::kDataLoss);
  CHECK(internal::IsValidUtf8(garbage.message()));
  ChatAssembler b;
  Status cut = b.AddJson(e_acute_400);  // not JSON, quoted to 120 bytes: 59 whole characters
  CHECK(internal::IsValidUtf8(cut.message()));
  CHECK(cut.message().find(e_acute_400.substr(0, 119) + "...\"") != std::string::npos);
}

TEST_CASE("Retry-After in seconds or as an HTTP date", "[transport]") {
  CHECK(ParseRetryAfterSeconds(" 3 ", 0) == 3);
  CHECK(ParseRetryAfterSeconds("0.5", 0) == 0.5);
  CHECK(ParseRetryAfterSeconds("", 0) < 0);
  CHECK(ParseRetryAfterSeconds("-4", 0) < 0);
  CHECK(ParseRetryAfterSeconds("soon", 0) < 0);
  // 2015-10-21 07:28:00 GMT is 1445412480; the three HTTP-date forms of RFC 9110.
  const int64_t now = 1445412480 - 90;
  CHECK(ParseRetryAfterSeconds("Wed, 21 Oct 2015 07:28:00 GMT", now) == 90);
  CHECK(ParseRetryAfterSeconds("Wednesday, 21-Oct-15 07:28:00 GMT", now) == 90);
  CHECK(ParseRetryAfterSeconds("Wed Oct 21 07:28:00 2015", now) == 90);
  CHECK(ParseRetryAfterSeconds("Wed, 21 Oct 2015 07:28:00 GMT", now + 1000) == 0);  // passed: retry now
  CHECK(ParseRetryAfterSeconds("Wed, 21 Oct 2015 07:28:00 PST", now) < 0);
}

TEST_CASE("backoff doubles up to the cap with injected jitter, Retry-After replaces it", "[transport]") {
  RetryPolicy policy;
  policy.initial_backoff = std::chrono::milliseconds(100);
  policy.max_backoff = std::chrono::milliseconds(350);
  policy.max_retry_after = std::chrono::milliseconds(2000);
  double u = 0;
  policy.uniform01 = [&u] { return u; };
  Backoff backoff(policy, SystemClock());
  CHECK(backoff.DelayMicros(1, -1) == 50000);   // d = 100 ms, half of it
  CHECK(backoff.DelayMicros(2, -1) == 100000);  // d = 200 ms
  CHECK(backoff.DelayMicros(3, -1) == 175000);  // d = 350 ms (capped)
  u = 1.0;
  CHECK(backoff.DelayMicros(1, -1) == 100000);
  CHECK(backoff.DelayMicros(1, 1.5) == 1500000);
  CHECK(backoff.DelayMicros(1, 30) == 2000000);  // capped at max_retry_after
}

}  // namespace
}  // namespace strata::transport_internal
