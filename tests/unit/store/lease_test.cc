// Write leases (Store::AcquireLease): one writer per agent, fencing of a writer that lost its
// lease, takeover after expiry, and two processes writing one agent. Every case runs against
// SQLite, PostgreSQL and PostgreSQL through PgBouncer.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "strata/store.h"
#include "testing/child_process.h"
#include "testing/postgres_testing.h"
#include "testing/wait_for.h"

namespace strata {
namespace {

ContextOptions Options(const std::string& id) {
  ContextOptions options;
  options.agent.id = id;
  return options;
}

StoreOptions Owner(const std::string& name, int64_t ttl_ms = 5000, bool renew = true) {
  StoreOptions options;
  options.lease_owner = name;
  options.lease_ttl_ms = ttl_ms;
  options.renew_leases = renew;
  options.busy_timeout_ms = 20000;
  return options;
}

std::vector<std::string> UserMessages(Store& store, const std::string& agent) {
  auto snapshot = store.LoadSnapshot(agent);
  REQUIRE(snapshot.ok());
  std::vector<Segment> segments = snapshot->segments;
  std::sort(segments.begin(), segments.end(),
            [](const Segment& a, const Segment& b) { return a.position < b.position; });
  std::vector<std::string> out;
  for (const Segment& s : segments) {
    if (s.kind == SegmentKind::kUser) out.push_back(s.content);
  }
  return out;
}

// Takes the lease, trying again while another live owner holds it.
StatusOr<AgentLease> AcquireWaiting(Store& store, const std::string& agent) {
  StatusOr<AgentLease> lease = store.AcquireLease(agent);
  testing::WaitFor([&] {
    if (lease.status().code() != StatusCode::kUnavailable) return true;
    lease = store.AcquireLease(agent);
    return lease.status().code() != StatusCode::kUnavailable;
  });
  return lease;
}

TEST_CASE("one store holds an agent's lease, another is refused and fenced off", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(location);
  auto a = location.Open(Owner("sidecar-a"));
  REQUIRE(a.ok());
  auto b = location.Open(Owner("sidecar-b"));
  REQUIRE(b.ok());
  REQUIRE((*a)->CreateAgent(Options("x")).ok());
  auto lease = (*a)->AcquireLease("x");
  REQUIRE(lease.ok());
  CHECK(lease->owner == "sidecar-a");
  CHECK(lease->epoch == 1);
  auto again = (*a)->AcquireLease("x");  // renewing keeps the epoch
  REQUIRE(again.ok());
  CHECK(again->epoch == 1);

  auto refused = (*b)->AcquireLease("x");
  CHECK(refused.status().code() == StatusCode::kUnavailable);
  CHECK_THAT(refused.status().message(), Catch::Contains("sidecar-a") && Catch::Contains("epoch 1"));
  StoredEvent event;
  event.agent_id = "x";
  event.type = "note";
  auto unleased = (*b)->AppendEvent(event);
  CHECK(unleased.status().code() == StatusCode::kAborted);
  CHECK_THAT(unleased.status().message(), Catch::Contains("sidecar-a"));
  CHECK((*a)->Events("x")->empty());  // the refused write wrote nothing

  REQUIRE((*a)->ReleaseLease("x").ok());
  auto taken = (*b)->AcquireLease("x");
  REQUIRE(taken.ok());
  CHECK(taken->epoch == 2);
  auto current = (*a)->GetLease("x");
  REQUIRE(current.ok());
  REQUIRE(current->has_value());
  CHECK((*current)->owner == "sidecar-b");
  REQUIRE((*b)->AppendEvent(event).ok());
  REQUIRE((*b)->ReleaseAllLeases().ok());
  CHECK((*(*a)->GetLease("x"))->owner.empty());
}

TEST_CASE("a writer whose lease expired and was taken over writes nothing and says who serves",
          "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(location);
  // The first writer's lease lasts 1 ms and is not renewed: it lapses at once.
  auto stale = location.Open(Owner("writer-1", 1, false));
  REQUIRE(stale.ok());
  auto context = CreateContext(**stale, Options("x"));
  REQUIRE(context.ok());
  REQUIRE((*stale)->AcquireLease("x").ok());
  REQUIRE((*context)->AppendUser("first").ok());
  const std::string acknowledged = (*context)->Build()->body;

  auto next = location.Open(Owner("writer-2"));
  REQUIRE(next.ok());
  auto lease = AcquireWaiting(**next, "x");
  REQUIRE(lease.ok());
  CHECK(lease->epoch == 2);
  auto reopened = OpenContext(**next, "x");
  REQUIRE(reopened.ok());
  CHECK((*reopened)->Build()->body == acknowledged);  // continues from the last acknowledged change

  auto late = (*context)->AppendUser("late write");
  REQUIRE_FALSE(late.ok());
  CHECK(late.status().code() == StatusCode::kAborted);
  CHECK_THAT(late.status().message(),
             Catch::Contains("now served by writer-2 since epoch 2") && Catch::Contains("wrote nothing"));
  CHECK((*context)->Build()->body == acknowledged);  // rolled back in the stale context too
  REQUIRE((*reopened)->AppendUser("second").ok());
  CHECK(UserMessages(**next, "x") == std::vector<std::string>{"first", "second"});
}

// One of two processes writing agent "shared": turns "<name>:<i>" while it holds the lease (a
// short one, not renewed, so that the other takes over while it still writes). Reports "ack
// <turn>" for every acknowledged turn and "lost <message>" for every refusal.
int Writer(const testing::BackendLocation& location, const std::string& name, int turns,
           int report) {
  auto store = location.Open(Owner(name, 40, false));
  if (!store.ok()) return 2;
  std::unique_ptr<Context> context;
  for (int i = 0; i < turns;) {
    if (context == nullptr) {
      if (!AcquireWaiting(**store, "shared").ok()) return 3;
      auto opened = OpenContext(**store, "shared");
      if (!opened.ok()) return 4;
      context = std::move(opened).value();
    }
    const std::string turn = name + ":" + std::to_string(i);
    auto appended = context->AppendUser(turn);
    if (appended.ok()) {
      testing::WriteReport(report, "ack " + turn + "\n");
      ++i;
    } else if (appended.status().code() == StatusCode::kAborted) {
      testing::WriteReport(report, "lost " + appended.status().message() + "\n");
      context.reset();  // reopen from the store once the lease is ours again
    } else {
      testing::WriteReport(report, "error " + appended.status().ToString() + "\n");
      return 5;
    }
  }
  return 0;
}

TEST_CASE("two processes writing one agent keep a linear history with every acknowledged turn "
          "once",
          "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(location);
  {
    auto store = location.Open();
    REQUIRE(store.ok());
    REQUIRE((*store)->CreateAgent(Options("shared")).ok());
  }
  constexpr int kTurns = 40;
  testing::ChildOutcome outcomes[2];
  std::thread second([&] {
    outcomes[1] = testing::RunInChild(
        [&](int report) { return Writer(location, "writer-b", kTurns, report); });
  });
  outcomes[0] =
      testing::RunInChild([&](int report) { return Writer(location, "writer-a", kTurns, report); });
  second.join();

  std::vector<std::string> acknowledged;
  int lost = 0;
  for (const testing::ChildOutcome& outcome : outcomes) {
    INFO(outcome.report);
    CHECK(outcome.exit_code == 0);
    std::istringstream lines(outcome.report);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind("ack ", 0) == 0) acknowledged.push_back(line.substr(4));
      if (line.rfind("lost ", 0) == 0) {
        ++lost;
        CHECK_THAT(line, Catch::Contains("is now served by writer-") ||
                             Catch::Contains("is served by writer-"));
      }
    }
  }
  CHECK(acknowledged.size() == 2 * kTurns);
  auto store = location.Open();
  REQUIRE(store.ok());
  std::vector<std::string> history = UserMessages(**store, "shared");
  // Every acknowledged turn is there exactly once, and nothing else is.
  std::multiset<std::string> stored(history.begin(), history.end());
  std::multiset<std::string> acked(acknowledged.begin(), acknowledged.end());
  CHECK(stored == acked);
  // Linear: each writer's turns appear in the order it wrote them.
  std::map<std::string, int> next;
  for (const std::string& turn : history) {
    const std::string writer = turn.substr(0, turn.find(':'));
    CHECK(std::stoi(turn.substr(turn.find(':') + 1)) == next[writer]++);
  }
  UNSCOPED_INFO("refused writes: " << lost);
}

TEST_CASE("a writer stopped past its lease writes nothing after it is resumed", "[store]") {
  STRATA_FOR_EACH_STORE_BACKEND(location);
  {
    auto store = location.Open();
    REQUIRE(store.ok());
    REQUIRE((*store)->CreateAgent(Options("x")).ok());
  }
  int go[2];
  int report[2];
  REQUIRE(::pipe(go) == 0);
  REQUIRE(::pipe(report) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // the writer: its lease lasts 300 ms and is renewed in the background
    ::close(go[1]);
    ::close(report[0]);
    auto store = location.Open(Owner("paused", 300, true));
    if (!store.ok() || !(*store)->AcquireLease("x").ok()) ::_exit(2);
    auto context = OpenContext(**store, "x");
    if (!context.ok() || !(*context)->AppendUser("before the pause").ok()) ::_exit(3);
    testing::WriteReport(report[1], "ready\n");
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(4);
    auto late = (*context)->AppendUser("after the pause");
    testing::WriteReport(report[1], late.ok() ? std::string("written\n")
                                              : late.status().ToString() + "\n");
    ::_exit(0);
  }
  ::close(go[0]);
  ::close(report[1]);
  // A failed REQUIRE below must not leave the writer stopped (it holds the test's output open).
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      if (::kill(pid, 0) == 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
  } reaper{pid};
  char buffer[4096];
  std::string got;
  while (got.find('\n') == std::string::npos) {
    ssize_t n = ::read(report[0], buffer, sizeof buffer);
    REQUIRE(n > 0);
    got.append(buffer, static_cast<size_t>(n));
  }
  REQUIRE(got == "ready\n");
  REQUIRE(::kill(pid, SIGSTOP) == 0);
  auto next = location.Open(Owner("successor"));
  REQUIRE(next.ok());
  auto lease = AcquireWaiting(**next, "x");  // possible once the paused writer's lease lapsed
  REQUIRE(lease.ok());
  auto context = OpenContext(**next, "x");
  REQUIRE(context.ok());
  REQUIRE((*context)->AppendUser("by the successor").ok());
  REQUIRE(::write(go[1], "g", 1) == 1);
  REQUIRE(::kill(pid, SIGCONT) == 0);
  got.clear();
  ssize_t n;
  while ((n = ::read(report[0], buffer, sizeof buffer)) > 0) got.append(buffer, n);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(report[0]);
  ::close(go[1]);
  CHECK(WIFEXITED(status));
  CHECK_THAT(got, Catch::StartsWith("ABORTED") && Catch::Contains("successor"));
  CHECK(UserMessages(**next, "x") ==
        std::vector<std::string>{"before the pause", "by the successor"});
}

}  // namespace
}  // namespace strata
