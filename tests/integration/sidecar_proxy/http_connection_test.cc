// The sidecar's HTTP listener over raw sockets (http_connection.h): clients that drip their
// request heads, malformed heads answered at once, and a proxy client that closes its connection
// while its turn runs. strata-sim is the upstream.
#include <arpa/inet.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "http_server.h"
#include "proxy.h"
#include "registry.h"
#include "sim_server.h"
#include "tenants.h"
#include "testing/command.h"
#include "testing/temp_dir.h"
#include "testing/wait_for.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;
using Catch::Matchers::Contains;
using strata::testing::RunCommand;

// A TCP client of 127.0.0.1:`port`, from the loopback address `source` (127.0.0.0/8 is all
// loopback: distinct sources are distinct clients to the listener).
class RawClient {
 public:
  RawClient(int port, const char* source = "127.0.0.1") {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    inet_pton(AF_INET, source, &local.sin_addr);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local)) == 0);
    sockaddr_in server{};
    server.sin_family = AF_INET;
    server.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &server.sin_addr);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&server), sizeof(server)) == 0);
  }
  ~RawClient() { Close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  // Sends what it can (the server may close early, e.g. after a 414).
  void Send(const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }
  // What arrives until the server closes, or `limit` passes (the limit fails a test that would
  // otherwise hang; it measures nothing).
  std::string ReadUntilClosed(std::chrono::seconds limit = std::chrono::seconds(20)) {
    std::string out;
    const auto until = std::chrono::steady_clock::now() + limit;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return out;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return out;
      char buffer[4096];
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) return out;
      out.append(buffer, static_cast<size_t>(n));
    }
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Reads one reply of a kept-alive connection: its head and a body of its Content-Length.
  std::string ReadUntilReply() {
    std::string in;
    for (;;) {
      const size_t head_end = in.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        const size_t at = in.find("Content-Length: ");
        REQUIRE(at != std::string::npos);
        const size_t length = std::strtoull(in.c_str() + at + 16, nullptr, 10);
        if (in.size() >= head_end + 4 + length) return in;
      }
      pollfd p{fd_, POLLIN, 0};
      REQUIRE(::poll(&p, 1, 20000) == 1);
      char buffer[65536];
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      REQUIRE(n > 0);
      in.append(buffer, static_cast<size_t>(n));
    }
  }
  // The TCP segments with data this end received so far (TCP_INFO).
  uint32_t DataSegmentsIn() const {
    tcp_info info{};
    socklen_t size = sizeof(info);
    REQUIRE(::getsockopt(fd_, IPPROTO_TCP, TCP_INFO, &info, &size) == 0);
    REQUIRE(size >= offsetof(tcp_info, tcpi_data_segs_in) + sizeof(info.tcpi_data_segs_in));
    return info.tcpi_data_segs_in;
  }
  // Waits up to `limit` for bytes to read.
  bool Readable(std::chrono::milliseconds limit) const {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(limit.count())) == 1;
  }

  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

int StatusOf(const std::string& reply) {
  if (reply.rfind("HTTP/1.1 ", 0) != 0) return 0;
  return std::atoi(reply.c_str() + 9);
}

json ErrorOf(const std::string& reply) {
  const size_t body = reply.find("\r\n\r\n");
  if (body == std::string::npos) return json();
  return json::parse(reply.substr(body + 4), nullptr, false)["error"];
}

struct Fixture {
  testing::TempDir temp;  // destroyed last: the store in it is closed first
  std::string dir;
  std::unique_ptr<sim::SimServer> sim;
  std::unique_ptr<Authenticator> authenticator;
  std::unique_ptr<AgentRegistry> registry;
  std::unique_ptr<Proxy> proxy;
  std::unique_ptr<HttpServer> http;

  explicit Fixture(const std::string& name, HttpServerOptions http_options = {})
      : temp("strata-http-connection-test-" + name + "-"), dir(temp.path()) {
    REQUIRE(!dir.empty());
    sim = std::move(sim::SimServer::Start(sim::SimOptions())).value();
    TenantConfig alpha;
    alpha.name = "alpha";
    alpha.token_sha256 = {Sha256Hex("alpha-token")};
    alpha.limits.max_request_bytes = 1 << 20;
    authenticator =
        std::make_unique<Authenticator>(std::vector<TenantConfig>{alpha}, TenantLimits());
    RegistryOptions registry_options;
    registry_options.store_path = dir + "/sidecar.db";
    registry_options.upstream = sim->base_url();
    // A turn that keeps its agent longer than this fails the test's Acquire.
    registry_options.lease_wait = std::chrono::seconds(20);
    registry = std::move(AgentRegistry::Open(registry_options)).value();
    ProxyOptions proxy_options;
    proxy_options.registry = registry.get();
    proxy_options.upstream = sim->base_url();
    proxy = std::make_unique<Proxy>(proxy_options);
    http_options.listen = "127.0.0.1:0";
    http_options.authenticator = authenticator.get();
    http_options.proxy = proxy.get();
    http = std::move(HttpServer::Start(http_options)).value();
  }

  // The reply to `request` sent whole on a new connection.
  std::string Exchange(const std::string& request, const char* source = "127.0.0.1") {
    RawClient client(http->port(), source);
    client.Send(request);
    return client.ReadUntilClosed();
  }
};

const std::string kHealthz = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

TEST_CASE("a listener stopped the moment it has started stops and closes its port",
          "[sidecar][proxy][http]") {
  // A SIGTERM can arrive as soon as the sidecar has printed its listener line. Stop must end the
  // listener's thread then too: it may not have begun to accept connections yet.
  Fixture f("stop-at-once");
  for (int round = 0; round < 50; ++round) {
    HttpServerOptions options;
    options.listen = "127.0.0.1:0";
    options.authenticator = f.authenticator.get();
    options.proxy = f.proxy.get();
    std::unique_ptr<HttpServer> server = std::move(HttpServer::Start(options)).value();
    const int port = server->port();
    std::promise<void> stopped;
    std::thread watchdog([done = stopped.get_future(), round]() {
      if (done.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
        // The listener's thread never ends and Stop waits for it: the test ends here.
        std::fprintf(stderr, "HttpServer::Stop did not return in 20 s (round %d)\n", round);
        std::_Exit(1);
      }
    });
    server->Stop();
    stopped.set_value();
    watchdog.join();
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    CHECK(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0);
    ::close(fd);
  }
}

TEST_CASE(
    "clients dripping their request heads neither freeze the listener nor outlast the "
    "head deadline",
    "[sidecar][proxy][http]") {
  HttpServerOptions options;
  options.threads = 4;
  options.head_timeout = std::chrono::milliseconds(500);
  options.max_connections_per_client = 2;
  Fixture f("slowloris", options);
  // Twice as many dripping connections as the listener has threads, from one client address.
  std::vector<std::unique_ptr<RawClient>> drippers;
  for (int i = 0; i < 8; ++i) {
    drippers.push_back(std::make_unique<RawClient>(f.http->port(), "127.0.0.2"));
    drippers.back()->Send("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Le");
  }
  // Another client is served meanwhile.
  const std::string health = f.Exchange(kHealthz, "127.0.0.3");
  CHECK(StatusOf(health) == 200);
  CHECK_THAT(health, Contains("\r\n\r\nok\n"));
  // Each dripper was either refused at once (above the per-client cap) or cut at the deadline.
  int refused = 0;
  int timed_out = 0;
  for (auto& dripper : drippers) {
    const std::string reply = dripper->ReadUntilClosed();
    INFO(reply);
    const int status = StatusOf(reply);
    CHECK((status == 429 || status == 408));
    if (status == 429) {
      ++refused;
      CHECK_THAT(ErrorOf(reply)["message"].get<std::string>(),
                 Contains("the client 127.0.0.2 has 2 connections open"));
    }
    if (status == 408) {
      ++timed_out;
      CHECK(ErrorOf(reply)["code"] == "request_timeout");
    }
  }
  CHECK(refused >= 1);
  CHECK(timed_out >= 2);
  CHECK(refused + timed_out == 8);
}

TEST_CASE("malformed request heads are refused at once, with what was wrong",
          "[sidecar][proxy][http]") {
  Fixture f("heads");
  const std::string post = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n";
  struct Case {
    std::string request;
    int status;
    std::string message;
  };
  for (const Case& c : std::initializer_list<Case>{
           {post + "Content-Length: -1\r\n\r\n", 400, "Content-Length \"-1\" is not a number"},
           {post + "Content-Length: 9e18\r\n\r\n", 400, "Content-Length \"9e18\" is not a number"},
           {post + "Content-Length: 9000000000000000000\r\n\r\n", 413, "is above the sidecar's"},
           {post + "Transfer-Encoding: chunked, identity\r\n\r\n", 400, "is not supported"},
           {post + "Content-Length: 2\r\nContent-Length: 30\r\n\r\n{}", 400,
            "two different Content-Length values"},
           {post + "Transfer-Encoding: xchunked\r\nContent-Length: 2\r\n\r\n{}", 400,
            "both Transfer-Encoding and Content-Length"},
           {post + "Transfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n{}", 400,
            "both Transfer-Encoding and Content-Length"},
           {post + "X-Strata-Agent: a\r\n b\r\nContent-Length: 2\r\n\r\n{}", 400, "obs-fold"},
           {post + "Authorization: Bearer alpha-token\r\nAuthorization: Bearer other\r\n"
                   "Content-Length: 2\r\n\r\n{}",
            400, "more than one authorization field"},
           {"GET /" + std::string(100000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n", 414,
            "the request line has more than 8190 bytes"},
       }) {
    INFO(c.request.substr(0, 200));
    const std::string reply = f.Exchange(c.request);
    INFO(reply.substr(0, 400));
    CHECK(StatusOf(reply) == c.status);
    const json error = ErrorOf(reply);
    REQUIRE(error.is_object());
    CHECK_THAT(error["message"].get<std::string>(), Contains(c.message));
    if (c.status == 414) CHECK(error["code"] == "uri_too_long");
  }
  // A good request on the same listener still works.
  CHECK(StatusOf(f.Exchange(kHealthz)) == 200);
}

TEST_CASE("a body that is not JSON gets a 400 that says why", "[sidecar][proxy][http]") {
  Fixture f("bodies");
  for (const auto& [body, message] : std::vector<std::pair<std::string, std::string>>{
           {"{\"messages\":[],\"user\":\"\xc3\"}", "is not valid UTF-8: the byte 0xC3"},
           {"{\"messages\":[],\"user\":\"\\ud800\"}", "surrogate U+D800"},
           {"{\"messages\":[],\"seed\":1e400}", "number overflow parsing '1e400'"},
       }) {
    const std::string reply = f.Exchange(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        "Authorization: Bearer alpha-token\r\nContent-Type: application/json\r\n"
        "Content-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body);
    INFO(reply);
    CHECK(StatusOf(reply) == 400);
    CHECK_THAT(ErrorOf(reply)["message"].get<std::string>(), Contains(message));
  }
}

TEST_CASE("a chat body is read whole however it is sent and held to its limits",
          "[sidecar][proxy][http]") {
  Fixture f("body-reads");
  const std::string head =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alpha-token\r\n";
  // A body above 64 KB arrives in many reads; one sent chunked declares no length.
  const std::string question = "q" + std::string(100000, 'x');
  const std::string body =
      json({{"messages", json::array({{{"role", "user"}, {"content", question}}})}}).dump();
  {
    RawClient client(f.http->port());
    // Two requests on one connection: the first body is read to its end, so the second request
    // starts where it ends.
    client.Send(head + "X-Strata-Agent: read-length\r\nContent-Length: " +
                std::to_string(body.size()) + "\r\n\r\n" + body);
    client.Send(kHealthz);
    const std::string replies = client.ReadUntilClosed();
    INFO(replies.substr(0, 600));
    CHECK(StatusOf(replies) == 200);
    const size_t second = replies.find("HTTP/1.1 ", 1);
    REQUIRE(second != std::string::npos);
    CHECK(StatusOf(replies.substr(second)) == 200);
    CHECK(replies.substr(second).find("\r\n\r\nok\n") != std::string::npos);
  }
  // `data` in chunked transfer encoding, in chunks of at most `piece` bytes.
  const auto chunked = [](const std::string& data, size_t piece) {
    std::string out;
    for (size_t at = 0; at < data.size(); at += piece) {
      char size[32];
      std::snprintf(size, sizeof(size), "%zx\r\n", std::min(piece, data.size() - at));
      out += size + data.substr(at, piece) + "\r\n";
    }
    return out + "0\r\n\r\n";
  };
  const std::string by_chunks = f.Exchange(head +
                                           "X-Strata-Agent: read-chunked\r\nConnection: "
                                           "close\r\nTransfer-Encoding: chunked\r\n\r\n" +
                                           chunked(body, 7000));
  INFO(by_chunks.substr(0, 600));
  CHECK(StatusOf(by_chunks) == 200);
  // Both agents got the same question, whole.
  const std::vector<sim::SimRequestLog> sent = f.sim->requests();
  REQUIRE(sent.size() == 2);
  for (const sim::SimRequestLog& request : sent) {
    const json messages = json::parse(request.body)["messages"];
    CHECK(messages.back()["content"] == question);
  }
  // A chunked body above the tenant's limit (1 MiB) is refused with 413.
  const std::string too_big =
      f.Exchange(head + "Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n" +
                 chunked(std::string(1100000, ' '), 1100000));
  CHECK(StatusOf(too_big) == 413);
  CHECK_THAT(ErrorOf(too_big)["message"].get<std::string>(),
             Contains("above tenant \"alpha\"'s max_request_bytes"));
  // A form-encoded body is held to cpp-httplib's 8,192 bytes for forms, and told to send JSON.
  const std::string form =
      f.Exchange(head + "Connection: close\r\nContent-Type: application/x-www-form-urlencoded\r\n" +
                 "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  CHECK(StatusOf(form) == 413);
  CHECK_THAT(ErrorOf(form)["message"].get<std::string>(),
             Contains("send it with Content-Type: application/json"));
  CHECK(f.sim->requests().size() == 2);
}

TEST_CASE("a reply's head goes out with its body in one segment and an interim reply at once",
          "[sidecar][proxy][http]") {
  Fixture f("one-segment");
  RawClient client(f.http->port());
  const std::string chat =
      json({{"messages", json::array({{{"role", "user"}, {"content", "Hello."}}})}}).dump();
  const std::string requests[] = {
      "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alpha-token\r\n"
      "X-Strata-Agent: one-segment\r\nContent-Type: application/json\r\nContent-Length: " +
          std::to_string(chat.size()) + "\r\n\r\n" + chat,
      "GET /no-such-path HTTP/1.1\r\nHost: x\r\n\r\n",
  };
  const int statuses[] = {200, 200, 404};
  for (size_t k = 0; k < 3; ++k) {
    INFO("request " << k);
    const uint32_t before = client.DataSegmentsIn();
    client.Send(requests[k]);
    const std::string reply = client.ReadUntilReply();
    CHECK(StatusOf(reply) == statuses[k]);
    CHECK(client.DataSegmentsIn() - before == 1);  // the head and the body together
  }
  // A reply without a body (HEAD) is not held back for one.
  client.Send("HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string head;
  while (head.find("\r\n\r\n") == std::string::npos) {
    REQUIRE(client.Readable(std::chrono::seconds(5)));
    char buffer[4096];
    const ssize_t n = ::recv(client.fd(), buffer, sizeof(buffer), 0);
    REQUIRE(n > 0);
    head.append(buffer, static_cast<size_t>(n));
  }
  CHECK(StatusOf(head) == 200);
  // A client that asks before sending its body gets "100 Continue" without waiting for the body,
  // then the reply.
  client.Send(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
      "Authorization: Bearer alpha-token\r\nX-Strata-Agent: one-segment-2\r\n"
      "Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: " +
      std::to_string(chat.size()) + "\r\n\r\n");
  REQUIRE(client.Readable(std::chrono::seconds(5)));
  char interim[64] = {};
  REQUIRE(::recv(client.fd(), interim, 25, 0) == 25);
  CHECK(std::string(interim) == "HTTP/1.1 100 Continue\r\n\r\n");
  client.Send(chat);
  CHECK(StatusOf(client.ReadUntilReply()) == 200);
}

TEST_CASE("a proxy client that closes its connection cancels its turn and frees its agent",
          "[sidecar][proxy][http]") {
  Fixture f("leaver");
  const TenantConfig* alpha = f.authenticator->Find("alpha");
  REQUIRE(alpha != nullptr);
  for (bool stream : {false, true}) {
    INFO("stream " << stream);
    const std::string agent = stream ? "leaver-stream" : "leaver-plain";
    // The upstream holds its answer for two minutes.
    REQUIRE(f.sim->InjectFault("slow-first-byte,delay_ms=120000", 1).ok());
    const size_t before = f.sim->requests().size();
    json body = {{"messages", json::array({{{"role", "user"}, {"content", "wait for it"}}})}};
    if (stream) body["stream"] = true;
    auto client = std::make_unique<RawClient>(f.http->port());
    client->Send(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        "alpha-token\r\nX-Strata-Agent: " +
        agent + "\r\nContent-Length: " + std::to_string(body.dump().size()) + "\r\n\r\n" +
        body.dump());
    // Polls until the upstream has the request (the turn is in flight), then leaves.
    REQUIRE(testing::WaitFor([&] { return f.sim->requests().size() > before; }));
    client->Close();
    // The turn ends: its agent is free again long before the upstream would have answered, and
    // its record says it was cancelled.
    StatusOr<AgentLease> lease = f.registry->Acquire(*alpha, agent);
    INFO(lease.status().message());
    REQUIRE(lease.ok());
    StatusOr<std::vector<RequestRecord>> records =
        f.registry->store().RecentRequests(lease->stored_id(), 5);
    REQUIRE(records.ok());
    REQUIRE(records->size() == 1);
    CHECK(records->front().code == StatusCode::kCancelled);
  }
}

}  // namespace
}  // namespace strata::sidecar
