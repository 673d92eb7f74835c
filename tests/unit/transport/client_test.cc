// Client with a scripted transport (no network): appending, records, failures.
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>

#include "strata/client.h"
#include "testing/fake_clock.h"
#include "testing/scripted_transport.h"

namespace strata {
namespace {

std::unique_ptr<Context> NewContext() {
  ContextOptions options;
  options.agent.id = "unit-agent";
  options.agent.tenant = "t";
  auto context = Context::Create(options).value();
  REQUIRE(context->SetSystemPrompt("You are a unit test.").ok());
  REQUIRE(context->AppendUser("Hello.").ok());
  return context;
}

// Keeps every record written and forwards it to `next`.
class KeepingSink : public RecordSink {
 public:
  explicit KeepingSink(RecordSink* next) : next_(next) {}
  Status Write(const RequestRecord& record) override {
    records.push_back(record);
    return next_->Write(record);
  }
  Status WriteEvent(const PrefixBreakEvent& event) override { return next_->WriteEvent(event); }
  std::vector<RequestRecord> records;

 private:
  RecordSink* next_;
};

TEST_CASE("Complete appends the reply and writes one record per request", "[transport][client]") {
  testing::ScriptedTransport transport;
  Response tool_reply;
  tool_reply.content = "";
  tool_reply.tool_calls = {{"call_1", "bash", R"({"cmd": "ls"})"}};
  tool_reply.finish_reason = "tool_calls";
  tool_reply.usage.reported = true;
  tool_reply.usage.prompt_tokens = 40;
  tool_reply.usage.completion_tokens = 7;
  tool_reply.usage.cached_tokens = 32;
  transport.Respond(tool_reply);
  transport.Fail(UnavailableError("HTTP 503: server error"), 503);
  std::ostringstream lines;
  JsonLinesRecordSink json_sink(lines);
  KeepingSink sink(&json_sink);
  ClientOptions options;
  options.transport = &transport;
  options.backend = Backend::kSglang;
  options.record_sink = &sink;
  auto client = Client::Create(options).value();
  auto context = NewContext();

  auto done = client->Complete(*context);
  REQUIRE(done.ok());
  RequestRecord record = done->record;
  CHECK(context->OpenToolCalls() == std::vector<std::string>{"call_1"});
  CHECK(record.input_tokens == 40);
  CHECK(record.cached_tokens_reported == 32);
  CHECK(record.output_tokens == 7);
  CHECK(record.finish_reason == "tool_calls");
  CHECK(record.kv_cache_bytes == 47 * options.kv_bytes_per_token + options.kv_bytes_per_sequence);
  CHECK(transport.bodies()[0].find("\"rid\":\"" + record.request_id + "\"") != std::string::npos);
  CHECK(transport.bodies()[0].find("\"cache_salt\":\"" + client->CacheSaltFor(context->options().agent) + "\"") !=
        std::string::npos);

  // A failure appends nothing and is recorded with its code.
  REQUIRE(context->AppendToolResult({"call_1", "a\nb", false}).ok());
  std::string before = context->Build()->body;
  auto failed = client->Complete(*context);
  CHECK(failed.status().code() == StatusCode::kUnavailable);
  // A failed request's record reaches the sink, as every request's does.
  REQUIRE(sink.records.size() == 2);
  CHECK(sink.records[0].request_id == done->record.request_id);
  record = sink.records[1];
  CHECK(record.code == StatusCode::kUnavailable);
  CHECK(record.http_status == 503);
  CHECK(context->Build()->body == before);
  // Script exhausted: FAILED_PRECONDITION from the fake, still recorded.
  CHECK(client->Complete(*context).status().code() == StatusCode::kFailedPrecondition);
  std::string all = lines.str();
  CHECK(std::count(all.begin(), all.end(), '\n') == 3);
  CHECK(all.find("\"code\":\"UNAVAILABLE\"") != std::string::npos);
}

// A ScriptedTransport whose every Send() takes 250 ms of `clock`'s time.
class SlowScriptedTransport : public testing::ScriptedTransport {
 public:
  explicit SlowScriptedTransport(testing::FakeClock* clock) : clock_(clock) {}
  Status Send(std::string_view body, const CallOptions& options, Response* response) override {
    clock_->Advance(250000);
    return ScriptedTransport::Send(body, options, response);
  }

 private:
  testing::FakeClock* clock_;
};

TEST_CASE("Records take their times and request ids from ClientOptions::clock", "[transport][client]") {
  std::vector<RequestRecord> records;
  for (int run = 0; run < 2; ++run) {
    testing::FakeClock clock;
    clock.Advance(5000000);  // 5 s after the start: the wall time moves with it
    SlowScriptedTransport transport(&clock);
    transport.Reply("one");
    ClientOptions options;
    options.transport = &transport;
    options.clock = &clock;
    auto client = Client::Create(options).value();
    auto context = NewContext();
    auto done = client->Complete(*context);
    REQUIRE(done.ok());
    records.push_back(done->record);
  }
  CHECK(records[0].started_unix_ms == testing::FakeClock::kStartUnixMillis + 5000);
  CHECK(records[0].total_ms == 250.0);
  // The id's random tag comes from the clock's Random64(): the same fake gives the same id.
  CHECK(records[0].request_id.rfind("unit-agent-", 0) == 0);
  CHECK(records[0].request_id == records[1].request_id);
}

TEST_CASE("append_reply=false leaves the context to the caller", "[transport][client]") {
  testing::ScriptedTransport transport;
  transport.Reply("summary text");
  ClientOptions options;
  options.transport = &transport;
  auto client = Client::Create(options).value();
  auto context = NewContext();
  std::string before = context->Build()->body;
  CompleteOptions complete;
  complete.append_reply = false;
  auto done = client->Complete(*context, complete);
  REQUIRE(done.ok());
  CHECK(done->response.content == "summary text");
  CHECK(done->assistant_segment_id.empty());
  CHECK(context->Build()->body == before);
}

TEST_CASE("Client::Create refuses missing transport and bad cache options", "[transport][client]") {
  CHECK(Client::Create({}).status().code() == StatusCode::kInvalidArgument);
  testing::ScriptedTransport transport;
  ClientOptions options;
  options.transport = &transport;
  options.cache.block_tokens = 0;
  CHECK(Client::Create(options).status().code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Refuses every write.
class RefusingSink : public RecordSink {
 public:
  Status Write(const RequestRecord&) override { return UnavailableError("the disk is full"); }
  Status WriteEvent(const PrefixBreakEvent&) override { return UnavailableError("the disk is full"); }
};

TEST_CASE("a record the sink refuses is a warning of the completion and a count, never dropped",
          "[transport][client]") {
  testing::ScriptedTransport transport;
  transport.Reply("one");
  transport.Reply("two");
  RefusingSink sink;
  ClientOptions options;
  options.transport = &transport;
  options.record_sink = &sink;
  auto client = Client::Create(options).value();
  auto context = NewContext();
  REQUIRE(context->SetSystemPrompt(std::string(4000, 'y')).ok());  // several blocks of prefix
  auto first = client->Complete(*context);
  REQUIRE(first.ok());  // the call itself succeeded
  REQUIRE(first->warnings.size() == 1);
  CHECK_THAT(first->warnings[0], Catch::Contains(first->record.request_id) &&
                                     Catch::Contains("the disk is full"));
  CHECK(client->record_write_failures() == 1);
  // A changed system prompt: the break event is refused too.
  REQUIRE(context->SetSystemPrompt(std::string(4000, 'x')).ok());
  REQUIRE(context->AppendUser("Again.").ok());
  auto second = client->Complete(*context);
  REQUIRE(second.ok());
  REQUIRE(second->prefix_break.has_value());
  CHECK(second->warnings.size() == 2);
  CHECK(client->record_write_failures() == 3);
}

// Completion::render_serial: a body handed back with Context::Recycle(body, serial) keeps its
// bytes, trusted (a byte changed in place is sent as changed), and the next request writes only
// what it adds; without the serial it is written whole.
TEST_CASE("a completion's body handed back with its render serial keeps its bytes",
          "[transport][client]") {
  testing::ScriptedTransport transport;
  ClientOptions options;
  options.transport = &transport;
  auto client = Client::Create(options).value();
  auto context = NewContext();
  auto scribble = [](std::string& body) {
    const size_t at = body.find("You are a unit test.");
    REQUIRE(at != std::string::npos);
    body.replace(at, 20, "YOU ARE A UNIT TEST.");
  };
  auto next = [&](const std::string& said) {
    REQUIRE(context->AppendUser(said).ok());
    transport.Reply("answered");
    auto done = client->Complete(*context);
    REQUIRE(done.ok());
    CHECK(transport.bodies().back() == done->body);
    return std::move(done).value();
  };
  transport.Reply("first");
  Completion done = client->Complete(*context).value();
  CHECK(done.render_serial != 0);
  scribble(done.body);
  context->Recycle(std::move(done.body), done.render_serial);
  done = next("Again.");
  CHECK(done.body.find("YOU ARE A UNIT TEST.") != std::string::npos);
  context->Recycle(std::move(done.body));
  done = next("Once more.");
  CHECK(done.body.find("You are a unit test.") != std::string::npos);
}

}  // namespace
}  // namespace strata
