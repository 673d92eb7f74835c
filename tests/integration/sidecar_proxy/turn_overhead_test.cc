// What a sidecar turn costs besides its work, checked as behaviour: no thread started per call
// (gRPC Complete and the proxy), TCP_NODELAY on the accepted HTTP connections and on the upstream
// ones, and one kept-alive upstream connection for an agent's turns. The sidecar runs in this
// process with strata-sim as its upstream, so the test reads its threads (/proc/self/task) and the
// options of its sockets (/proc/self/fd) directly.
#include <arpa/inet.h>
#include <dirent.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "http_connection.h"
#include "http_server.h"
#include "proxy.h"
#include "registry.h"
#include "service.h"
#include "sim_server.h"
#include "tenants.h"
#include "testing/command.h"
#include "testing/skip.h"
#include "testing/temp_dir.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;

// The ids of this process's threads now.
std::set<int> ThreadIds() {
  std::set<int> ids;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return ids;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ids.insert(std::atoi(entry->d_name));
  }
  ::closedir(dir);
  return ids;
}

struct TcpSocket {
  int fd = -1;
  int local_port = 0;
  int peer_port = 0;
};

// This process's connected IPv4 TCP sockets.
std::vector<TcpSocket> TcpSockets() {
  std::vector<TcpSocket> out;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return out;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = std::atoi(entry->d_name);
    sockaddr_in local{}, peer{};
    socklen_t local_size = sizeof(local), peer_size = sizeof(peer);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) != 0 ||
        local.sin_family != AF_INET ||
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0) {
      continue;
    }
    out.push_back({fd, ntohs(local.sin_port), ntohs(peer.sin_port)});
  }
  ::closedir(dir);
  return out;
}

bool NoDelay(int fd) {
  int value = 0;
  socklen_t size = sizeof(value);
  REQUIRE(::getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &value, &size) == 0);
  return value != 0;
}

// One kept-alive HTTP/1.1 connection from this process.
class RawClient {
 public:
  explicit RawClient(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  }
  ~RawClient() { ::close(fd_); }

  int local_port() const {
    sockaddr_in local{};
    socklen_t size = sizeof(local);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&local), &size);
    return ntohs(local.sin_port);
  }

  // Sends one request and returns the status code and body of its answer (Content-Length).
  std::pair<int, std::string> Send(const std::string& method, const std::string& path,
                                   const std::string& body, const std::string& agent = "") {
    std::string request = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    if (!agent.empty()) request += "X-Strata-Agent: " + agent + "\r\n";
    if (!body.empty()) {
      request += "Content-Type: application/json\r\nContent-Length: " +
                 std::to_string(body.size()) + "\r\n";
    }
    request += "\r\n" + body;
    REQUIRE(::send(fd_, request.data(), request.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(request.size()));
    std::string in;
    size_t head_end;
    while ((head_end = in.find("\r\n\r\n")) == std::string::npos) REQUIRE(Receive(&in));
    std::string head = in.substr(0, head_end);
    for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const size_t length_at = head.find("content-length:");
    REQUIRE(length_at != std::string::npos);
    const size_t length = std::strtoull(head.c_str() + length_at + 15, nullptr, 10);
    while (in.size() < head_end + 4 + length) REQUIRE(Receive(&in));
    return {std::atoi(head.c_str() + 9), in.substr(head_end + 4, length)};
  }

 private:
  bool Receive(std::string* in) {
    char buffer[65536];
    const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
    if (n <= 0) return false;
    in->append(buffer, static_cast<size_t>(n));
    return true;
  }

  int fd_;
};

// strata-sim, whose answers record the threads of this process while the sidecar waits for them,
// and an agent registry sending to it.
struct Upstream {
  std::mutex mu;
  std::vector<std::set<int>> threads_during_calls;  // guarded by mu
  std::unique_ptr<sim::SimServer> sim;
  std::unique_ptr<Authenticator> authenticator;
  std::unique_ptr<AgentRegistry> registry;

  explicit Upstream(const std::string& dir) {
    sim::SimOptions sim_options;
    sim_options.answer = [this](const std::string&, int64_t) {
      std::lock_guard<std::mutex> lock(mu);
      threads_during_calls.push_back(ThreadIds());
      return std::string("Noted.");
    };
    sim = std::move(sim::SimServer::Start(sim_options)).value();
    authenticator = std::make_unique<Authenticator>(std::vector<TenantConfig>{}, TenantLimits());
    RegistryOptions registry_options;
    registry_options.store_path = dir + "/sidecar.db";
    registry_options.upstream = sim->base_url();
    registry = std::move(AgentRegistry::Open(registry_options)).value();
  }

  // Threads seen during a later call that were not there during the first `warm_up` calls.
  std::set<int> NewThreadsAfter(size_t warm_up) {
    std::lock_guard<std::mutex> lock(mu);
    REQUIRE(threads_during_calls.size() > warm_up);
    std::set<int> known;
    for (size_t i = 0; i < warm_up; ++i) {
      known.insert(threads_during_calls[i].begin(), threads_during_calls[i].end());
    }
    std::set<int> fresh;
    for (size_t i = warm_up; i < threads_during_calls.size(); ++i) {
      for (int id : threads_during_calls[i]) {
        if (!known.count(id)) fresh.insert(id);
      }
    }
    return fresh;
  }
};

// The proxy's HTTP listener in front of `upstream`.
struct ProxyServer {
  std::unique_ptr<Proxy> proxy;
  std::unique_ptr<HttpServer> http;

  explicit ProxyServer(Upstream& upstream) {
    ProxyOptions proxy_options;
    proxy_options.registry = upstream.registry.get();
    proxy_options.upstream = upstream.sim->base_url();
    proxy = std::make_unique<Proxy>(proxy_options);
    HttpServerOptions http_options;
    http_options.listen = "127.0.0.1:0";
    http_options.authenticator = upstream.authenticator.get();
    http_options.proxy = proxy.get();
    http = std::move(HttpServer::Start(http_options)).value();
  }
};

// A growing conversation as the client sends it, one more user message per turn.
std::string Conversation(int turns) {
  json messages = json::array();
  for (int i = 0; i <= turns; ++i) {
    if (i > 0) messages.push_back({{"role", "assistant"}, {"content", "Noted."}});
    messages.push_back({{"role", "user"}, {"content", "step " + std::to_string(i)}});
  }
  return json{{"model", "glm-5.3-flash"}, {"messages", messages}}.dump();
}

constexpr int kCalls = 20;
constexpr int kGrpcCalls = 40;

TEST_CASE("proxy: accepted connections and upstream connections have TCP_NODELAY set",
          "[sidecar][proxy]") {
  const testing::TempDir dir("strata-turn-overhead-nodelay-");
  REQUIRE(!dir.path().empty());
  Upstream upstream(dir.path());
  ProxyServer server(upstream);
  RawClient client(server.http->port());
  auto [status, body] = client.Send("POST", "/v1/chat/completions", Conversation(0), "a1");
  INFO(body);
  REQUIRE(status == 200);

  // The sidecar's end of the client's connection, and its kept-alive connection to strata-sim.
  int accepted = 0, upstream_ends = 0;
  for (const TcpSocket& s : TcpSockets()) {
    if (s.local_port == server.http->port() && s.peer_port == client.local_port()) {
      ++accepted;
      CHECK(NoDelay(s.fd));
    }
    if (s.peer_port == upstream.sim->http_port()) {
      ++upstream_ends;
      CHECK(NoDelay(s.fd));
    }
  }
  CHECK(accepted == 1);
  CHECK(upstream_ends == 1);
}

TEST_CASE("proxy: the listener lets a burst of new connections wait to be accepted",
          "[sidecar][proxy]") {
  if (testing::RunCommand("command -v ss >/dev/null && echo yes").output.find("yes") ==
      std::string::npos) {
    STRATA_SKIP("ss (iproute2) is not installed: it shows a listening socket's backlog");
  }
  const testing::TempDir dir("strata-turn-overhead-backlog-");
  REQUIRE(!dir.path().empty());
  Upstream upstream(dir.path());
  ProxyServer server(upstream);
  // ss -ltn: a listening socket's Send-Q is its backlog.
  const std::string out = testing::RunCommand("ss -Hltn 'sport = :" +
                                              std::to_string(server.http->port()) + "'")
                              .output;
  INFO(out);
  std::istringstream fields(out);
  std::string state, recv_q, send_q;
  fields >> state >> recv_q >> send_q;
  CHECK(state == "LISTEN");
  CHECK(send_q == std::to_string(kListenBacklog));
}

TEST_CASE("proxy: an agent's turns reuse one upstream connection and start no thread per call",
          "[sidecar][proxy]") {
  const testing::TempDir dir("strata-turn-overhead-proxy-threads-");
  REQUIRE(!dir.path().empty());
  Upstream upstream(dir.path());
  ProxyServer server(upstream);
  RawClient client(server.http->port());
  for (int turn = 0; turn < kCalls; ++turn) {
    auto [status, body] = client.Send("POST", "/v1/chat/completions", Conversation(turn), "a1");
    INFO(body);
    REQUIRE(status == 200);
  }
  CHECK(upstream.sim->connections_accepted() == 1);  // keep-alive: one connection for every turn
  // After the first two calls (which start the listener's workers and the simulator's connection
  // thread), no call starts a thread.
  CHECK(upstream.NewThreadsAfter(2).empty());
}

TEST_CASE("gRPC Complete starts no thread per call to watch for the client leaving",
          "[sidecar]") {
  const testing::TempDir dir("strata-turn-overhead-grpc-threads-");
  REQUIRE(!dir.path().empty());
  Upstream upstream(dir.path());
  ContextServiceImpl service(upstream.registry.get(), upstream.authenticator.get());
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  // gRPC's own pollers are kept once started (by default a poller beyond 2 exits and is started
  // again later), so that the threads counted below are the service's.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 64);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  REQUIRE(server != nullptr);
  auto stub = v1::ContextService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext context;
    v1::CreateAgentRequest request;
    request.set_agent_id("g1");
    v1::AgentInfo info;
    grpc::Status created = stub->CreateAgent(&context, request, &info);
    REQUIRE(created.ok());
  }
  for (int turn = 0; turn < kGrpcCalls; ++turn) {
    grpc::ClientContext context;
    v1::CompleteRequest request;
    request.set_agent_id("g1");
    request.set_user_message("step " + std::to_string(turn));
    auto reader = stub->Complete(&context, request);
    v1::CompleteEvent event;
    bool got_turn = false;
    while (reader->Read(&event)) got_turn = got_turn || event.has_turn();
    grpc::Status finished = reader->Finish();
    INFO(finished.error_message());
    REQUIRE(finished.ok());
    REQUIRE(got_turn);
  }
  CHECK(upstream.sim->connections_accepted() == 1);
  // A watcher thread per call shows as at least one new thread per call after the warm-up (35
  // here). gRPC's synchronous server may still start a poller now and then on a loaded machine,
  // so a few may appear, but far fewer than calls.
  const size_t warm_up = 5;
  const std::set<int> fresh = upstream.NewThreadsAfter(warm_up);
  INFO(fresh.size() << " new threads in " << kGrpcCalls - warm_up << " calls");
  CHECK(fresh.size() * 2 < kGrpcCalls - warm_up);
  server->Shutdown();
}

TEST_CASE("gRPC Complete stores each turn with its user message in one write transaction",
          "[sidecar]") {
  const testing::TempDir dir("strata-turn-overhead-grpc-commit-");
  REQUIRE(!dir.path().empty());
  Upstream upstream(dir.path());
  ContextServiceImpl service(upstream.registry.get(), upstream.authenticator.get());
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  REQUIRE(server != nullptr);
  auto stub = v1::ContextService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext context;
    v1::CreateAgentRequest request;
    request.set_agent_id("g1");
    v1::AgentInfo info;
    REQUIRE(stub->CreateAgent(&context, request, &info).ok());
  }
  Store& store = upstream.registry->store();
  for (int turn = 0; turn < 4; ++turn) {
    INFO("turn " << turn);
    const int64_t before = store.Stats()->write_transactions;
    grpc::ClientContext context;
    v1::CompleteRequest request;
    request.set_agent_id("g1");
    request.set_user_message("step " + std::to_string(turn));
    auto reader = stub->Complete(&context, request);
    v1::CompleteEvent event;
    std::string user_segment;
    while (reader->Read(&event)) {
      if (event.has_turn()) user_segment = event.turn().user_segment_id();
    }
    grpc::Status finished = reader->Finish();
    INFO(finished.error_message());
    REQUIRE(finished.ok());
    // The user message, the reply, the record, growth and cache state: one Store::CommitTurn.
    CHECK(store.Stats()->write_transactions == before + 1);
    REQUIRE_FALSE(user_segment.empty());
    std::vector<StoredAgent> agents = std::move(store.ListAgents()).value();
    REQUIRE(agents.size() == 1);
    ContextSnapshot stored = std::move(store.LoadSnapshot(agents[0].options.agent.id)).value();
    bool found = false;
    for (const Segment& s : stored.segments) {
      found = found || (s.id == user_segment && s.content == "step " + std::to_string(turn));
    }
    CHECK(found);
  }
  server->Shutdown();
}

}  // namespace
}  // namespace strata::sidecar
