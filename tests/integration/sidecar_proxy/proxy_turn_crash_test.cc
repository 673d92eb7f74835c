// Crash safety of the sidecar's proxied turns: a child process serves chat completions through the
// proxy (Proxy::ChatCompletions over an agent registry on a SQLite store, a scripted upstream), as
// a client that sends its whole conversation with every request, and is killed with SIGKILL at
// random (seeded) moments. A proxied turn (the reconciled user message, the reply, its record,
// growth, cache state and the client's view) is one Store::CommitTurn, so after every kill the
// store holds whole turns only: each question with its answer, as many records, and a client view
// naming exactly them; and every turn the client was answered is there.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "proxy.h"
#include "reconcile.h"
#include "registry.h"
#include "strata/store.h"
#include "tenants.h"
#include "testing/scripted_transport.h"
#include "testing/temp_dir.h"

namespace strata::sidecar {
namespace {

using json = nlohmann::json;
using testing::TempDir;

constexpr uint32_t kSeed = 20261203;
constexpr char kAgent[] = "proxy-crash-agent";

std::string Question(int64_t turn) {
  return "question " + std::to_string(turn) + " " + std::string(300, 'q');
}
std::string Reply(int64_t turn) {
  return "reply " + std::to_string(turn) + " " + std::string(300, 'r');
}

// The child: a client that knows `answered` turns continues its conversation through the proxy,
// reporting each turn it is answered.
[[noreturn]] void RunChild(const std::string& path, StoreSync sync, int64_t answered, int ack_fd) {
  strata::testing::ScriptedTransport transport;
  RegistryOptions registry_options;
  registry_options.store_path = path;
  registry_options.store_sync = sync;
  registry_options.transport = &transport;
  StatusOr<std::unique_ptr<AgentRegistry>> registry = AgentRegistry::Open(registry_options);
  if (!registry.ok()) ::_exit(10);
  ProxyOptions options;
  options.registry = registry->get();
  Proxy proxy(options);
  TenantConfig tenant;
  tenant.name = "alpha";
  json messages = json::array({{{"role", "system"}, {"content", "You answer questions."}}});
  for (int64_t turn = 1; turn <= answered; ++turn) {
    messages.push_back({{"role", "user"}, {"content", Question(turn)}});
    messages.push_back({{"role", "assistant"}, {"content", Reply(turn)}});
  }
  if (::write(ack_fd, "R\n", 2) != 2) ::_exit(13);  // serving from now on
  for (int64_t turn = answered + 1; turn < 100000; ++turn) {
    messages.push_back({{"role", "user"}, {"content", Question(turn)}});
    transport.Reply(Reply(turn));
    HttpReply reply = proxy.ChatCompletions(tenant, kAgent, json{{"messages", messages}}.dump());
    if (reply.status != 200 || reply.body.find(Reply(turn)) == std::string::npos) ::_exit(14);
    messages.push_back({{"role", "assistant"}, {"content", Reply(turn)}});
    std::string ack = std::to_string(turn) + "\n";
    if (::write(ack_fd, ack.data(), ack.size()) != static_cast<ssize_t>(ack.size())) ::_exit(13);
  }
  ::_exit(0);
}

// Kills the child at a random moment: mostly after its first answered turn, sometimes while it
// opens. Returns the turns it reported answered, one a line.
std::string KillChild(pid_t pid, int fd, std::mt19937& rng) {
  std::string acks;
  if (rng() % 5 == 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 5000));
  } else {
    char c = 0;
    while (::read(fd, &c, 1) == 1 && c != '\n') acks.push_back(c);
    REQUIRE(acks == "R");
    acks.clear();
    // Wait for the first answered turn, so that the kill lands mid-run however loaded the
    // machine is.
    while (::read(fd, &c, 1) == 1 && c != '\n') acks.push_back(c);
    REQUIRE(!acks.empty());
    acks.push_back('\n');
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 30000));
  }
  ::kill(pid, SIGKILL);
  int wstatus = 0;
  REQUIRE(::waitpid(pid, &wstatus, 0) == pid);
  INFO("child status " << wstatus);
  REQUIRE(WIFSIGNALED(wstatus));  // it was killed, not failing on its own
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) acks.append(buf, static_cast<size_t>(n));
  ::close(fd);
  if (acks.rfind("R\n", 0) == 0) acks.erase(0, 2);
  return acks;
}

// The agent's history messages in order, as "user:..." and "assistant:...".
std::vector<std::string> History(const Context& context) {
  std::vector<std::string> out;
  for (const Segment& s : context.Segments()) {
    if (s.layer != Layer::kHistory) continue;
    out.push_back((s.kind == SegmentKind::kUser ? "user:" : "assistant:") + s.content);
  }
  return out;
}

// Checks what the store at `path` holds after a kill: whole turns only, `answered` of them at
// least and at most one more; returns how many.
int64_t CheckStore(const std::string& path, int64_t answered) {
  std::unique_ptr<Store> store = std::move(OpenSqliteStore(path)).value();
  std::vector<StoredAgent> agents = std::move(store->ListAgents()).value();
  if (agents.empty()) {  // killed before the agent was created
    REQUIRE(answered == 0);
    return 0;
  }
  REQUIRE(agents.size() == 1);
  const std::string id = agents[0].options.agent.id;
  auto context = OpenContext(*store, id);
  REQUIRE(context.ok());
  const std::vector<std::string> history = History(**context);
  REQUIRE(history.size() % 2 == 0);  // a question never without its answer
  const int64_t held = static_cast<int64_t>(history.size() / 2);
  INFO("answered " << answered << ", held " << held);
  // Every answered turn is there; at most the one in flight committed unanswered.
  REQUIRE(held >= answered);
  REQUIRE(held <= answered + 1);
  for (int64_t turn = 1; turn <= held; ++turn) {
    REQUIRE(history[2 * (turn - 1)] == "user:" + Question(turn));
    REQUIRE(history[2 * (turn - 1) + 1] == "assistant:" + Reply(turn));
  }
  auto records = store->RecentRequests(id, 100000);
  REQUIRE(records.ok());
  REQUIRE(static_cast<int64_t>(records->size()) == held);
  for (const RequestRecord& r : *records) REQUIRE(r.code == StatusCode::kOk);
  // The client's view names exactly the stored turns.
  auto view = LoadClientView(*store, id);
  REQUIRE(view.ok());
  REQUIRE(static_cast<int64_t>(view->entries().size()) == 2 * held);
  if (held > 0) REQUIRE(view->entries().back().role == "assistant");
  return held;
}

TEST_CASE("SIGKILL during proxied turns leaves whole turns only and loses none answered",
          "[sidecar][crash]") {
  TempDir dir;
  const std::string path = dir.File("sidecar.db");
  constexpr int kKills = 16;
  std::mt19937 rng(kSeed);
  int64_t answered = 0;
  int kills_mid_run = 0;
  for (int kill = 0; kill < kKills; ++kill) {
    INFO("kill " << kill);
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const StoreSync sync = kill % 2 == 0 ? StoreSync::kNormal : StoreSync::kFull;
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(fds[0]);
      RunChild(path, sync, answered, fds[1]);
    }
    ::close(fds[1]);
    const std::string acks = KillChild(pid, fds[0], rng);
    if (!acks.empty()) {
      size_t last = acks.rfind('\n', acks.size() - 2);
      answered = std::stoll(acks.substr(last == std::string::npos ? 0 : last + 1));
      ++kills_mid_run;
    }
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {  // killed before the child created the file
      REQUIRE(answered == 0);
      continue;
    }
    // The turn committed but not answered counts as answered from now on: the client's next
    // conversation holds it (as a client that got the answer would send it).
    answered = CheckStore(path, answered);
  }
  CHECK(kills_mid_run >= kKills / 2);
  CHECK(answered > 10);
}

}  // namespace
}  // namespace strata::sidecar
