// Crash safety of the Agent's turn: a child process runs turns of an agent attached to a store (a
// user message, then Complete() with a scripted answer) and is killed with SIGKILL at random
// (seeded) moments. A turn's writes (the reply, its request record, growth point and cache state)
// are one Store::CommitTurn, so after every kill the reopened store holds whole turns only: as
// many replies as records as growth points, each reply the one its turn was given, and every turn
// the child saw acknowledged.
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <random>
#include <thread>

#include "strata/agent.h"
#include "testing/scripted_transport.h"
#include "testing/temp_dir.h"

namespace strata {
namespace {

using testing::TempDir;

constexpr uint32_t kSeed = 20261201;
constexpr char kAgent[] = "turn-crash-agent";

std::string Question(int64_t turn) { return "question " + std::to_string(turn) + std::string(300, 'q'); }
std::string Reply(int64_t turn) { return "reply " + std::to_string(turn) + std::string(300, 'r'); }

// Assistant replies in the context's history, in order.
std::vector<std::string> Replies(const Context& context) {
  std::vector<std::string> out;
  for (const Segment& s : context.Segments()) {
    if (s.layer == Layer::kHistory && s.kind == SegmentKind::kAssistant) out.push_back(s.content);
  }
  return out;
}

// The child: continue the agent's turns from what the store holds, reporting each acknowledged
// turn's number.
[[noreturn]] void RunChild(const std::string& path, StoreSync sync, int ack_fd) {
  StoreOptions options;
  options.synchronous = sync;
  auto store = OpenSqliteStore(path, options);
  if (!store.ok()) ::_exit(10);
  testing::ScriptedTransport transport;
  AgentServices services;
  services.transport = &transport;
  services.store = store->get();
  OpenOptions open;
  open.services = services;
  StatusOr<std::unique_ptr<Agent>> agent = Agent::Open(**store, kAgent, open);
  if (agent.status().code() == StatusCode::kNotFound) {
    AgentConfig config;
    config.identity.id = kAgent;
    config.tokenizer = "estimate";
    agent = Agent::Create(config, services);
  }
  if (!agent.ok()) ::_exit(11);
  if (::write(ack_fd, "R\n", 2) != 2) ::_exit(13);  // restored; running turns from now on
  for (int64_t turn = static_cast<int64_t>(Replies((*agent)->context()).size()) + 1; turn < 100000;
       ++turn) {
    const std::vector<Segment> segments = (*agent)->context().Segments();
    // A user message committed before a kill that took its turn: it is asked again as it is.
    if (segments.empty() || segments.back().kind != SegmentKind::kUser) {
      if (!(*agent)->AppendUser(Question(turn)).ok()) ::_exit(12);
    }
    transport.Reply(Reply(turn));
    if (!(*agent)->Complete().ok()) ::_exit(14);
    std::string ack = std::to_string(turn) + "\n";
    if (::write(ack_fd, ack.data(), ack.size()) != static_cast<ssize_t>(ack.size())) ::_exit(13);
  }
  ::_exit(0);
}

std::string IntegrityCheck(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return "cannot open";
  }
  std::string result;
  sqlite3_exec(
      db, "PRAGMA integrity_check",
      [](void* out, int, char** values, char**) {
        *static_cast<std::string*>(out) += values[0] ? values[0] : "NULL";
        return 0;
      },
      &result, nullptr);
  sqlite3_close(db);
  return result;
}

// Kills the child at a random moment: mostly after its first acknowledged turn, sometimes while
// it opens. Returns what it reported.
std::string KillChild(pid_t pid, int fd, std::mt19937& rng) {
  std::string acks;
  if (rng() % 5 == 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 5000));
  } else {
    char c = 0;
    while (::read(fd, &c, 1) == 1 && c != '\n') acks.push_back(c);
    REQUIRE(acks == "R");
    acks.clear();
    // Wait for the first acknowledged turn, so that the kill lands mid-run however loaded the
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

TEST_CASE("SIGKILL during agent turns leaves whole turns only and loses none acknowledged",
          "[store][crash][agent]") {
  TempDir dir;
  const std::string path = dir.File("turns.db");
  constexpr int kKills = 16;
  std::mt19937 rng(kSeed);
  int64_t acknowledged = 0;
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
      RunChild(path, sync, fds[1]);
    }
    ::close(fds[1]);
    const std::string acks = KillChild(pid, fds[0], rng);
    if (!acks.empty()) {
      size_t last = acks.rfind('\n', acks.size() - 2);
      acknowledged = std::stoll(acks.substr(last == std::string::npos ? 0 : last + 1));
      ++kills_mid_run;
    }
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {  // killed before the child created the file
      REQUIRE(acknowledged == 0);
      continue;
    }
    REQUIRE(IntegrityCheck(path) == "ok");
    auto store = OpenSqliteStore(path);
    REQUIRE(store.ok());
    auto agents = (*store)->ListAgents();
    REQUIRE(agents.ok());
    if (agents->empty()) {  // killed before the agent was created
      REQUIRE(acknowledged == 0);
      continue;
    }
    auto context = OpenContext(**store, kAgent);
    REQUIRE(context.ok());
    const std::vector<std::string> replies = Replies(**context);
    const int64_t held = static_cast<int64_t>(replies.size());
    INFO("acknowledged " << acknowledged << ", held " << held);
    // Every acknowledged turn is there; at most the one in flight committed unacknowledged.
    REQUIRE(held >= acknowledged);
    REQUIRE(held <= acknowledged + 1);
    acknowledged = held;
    // Whole turns only: each reply with its record and growth point, in order.
    for (int64_t turn = 1; turn <= held; ++turn) REQUIRE(replies[turn - 1] == Reply(turn));
    auto records = (*store)->RecentRequests(kAgent, 100000);
    auto growth = (*store)->Growth(kAgent);
    REQUIRE((records.ok() && growth.ok()));
    REQUIRE(static_cast<int64_t>(records->size()) == held);
    REQUIRE(static_cast<int64_t>(growth->size()) == held);
    for (const RequestRecord& r : *records) REQUIRE(r.code == StatusCode::kOk);
    if (held > 0) {
      REQUIRE(growth->back().turn == held);
      auto cache = (*store)->GetAgentState(kAgent, "prefix_cache");
      REQUIRE(cache.ok());
      REQUIRE(cache->has_value());
    }
  }
  CHECK(kills_mid_run >= kKills / 2);
  CHECK(acknowledged > 10);
}

}  // namespace
}  // namespace strata
