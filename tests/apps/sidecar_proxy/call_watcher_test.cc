#include "call_watcher.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "http_connection.h"
#include "testing/wait_for.h"

namespace strata::sidecar {
namespace {

using std::chrono::milliseconds;

// Subjects are ints; the probe reports those in `gone` as left, and records what it was shown.
struct FakeClients {
  std::mutex mu;
  std::set<int> gone;    // guarded by mu
  std::set<int> probed;  // every subject the probe saw; guarded by mu
  std::atomic<int> rounds{0};

  CallWatcher<int>::Probe Probe() {
    return [this](const std::vector<int>& subjects) {
      std::lock_guard<std::mutex> lock(mu);
      std::vector<size_t> left;
      for (size_t i = 0; i < subjects.size(); ++i) {
        probed.insert(subjects[i]);
        if (gone.count(subjects[i])) left.push_back(i);
      }
      ++rounds;
      return left;
    };
  }
  void Leave(int subject) {
    std::lock_guard<std::mutex> lock(mu);
    gone.insert(subject);
  }
  bool Probed(int subject) {
    std::lock_guard<std::mutex> lock(mu);
    return probed.count(subject) > 0;
  }
};

TEST_CASE("the call watcher cancels exactly the calls whose client left",
          "[sidecar_proxy][concurrency]") {
  FakeClients clients;
  CallWatcher<int> watcher(clients.Probe(), milliseconds(1));
  CancellationToken stays, leaves;
  std::shared_ptr<void> a = watcher.Watch(1, &stays);
  std::shared_ptr<void> b = watcher.Watch(2, &leaves);
  REQUIRE(testing::WaitFor([&] { return clients.Probed(1) && clients.Probed(2); }));
  CHECK_FALSE(stays.cancelled());
  CHECK_FALSE(leaves.cancelled());
  clients.Leave(2);
  REQUIRE(testing::WaitFor([&] { return leaves.cancelled(); }));
  // Several rounds later the call whose client stayed is still running.
  const int seen = clients.rounds.load();
  REQUIRE(testing::WaitFor([&] { return clients.rounds.load() >= seen + 3; }));
  CHECK_FALSE(stays.cancelled());
}

TEST_CASE("a released call is no longer watched: its client leaving later cancels nothing",
          "[sidecar_proxy][concurrency]") {
  FakeClients clients;
  CallWatcher<int> watcher(clients.Probe(), milliseconds(1));
  CancellationToken first_token;
  {
    std::shared_ptr<void> first = watcher.Watch(7, &first_token);
    REQUIRE(testing::WaitFor([&] { return clients.Probed(7); }));
  }
  // Released: the client of 7 leaves afterwards; the watcher goes on probing the next call only.
  const int rounds = clients.rounds.load();
  clients.Leave(7);
  CancellationToken second_token;
  std::shared_ptr<void> second = watcher.Watch(8, &second_token);
  REQUIRE(testing::WaitFor([&] { return clients.Probed(8); }));
  REQUIRE(testing::WaitFor([&] { return clients.rounds.load() >= rounds + 3; }));
  CHECK_FALSE(first_token.cancelled());
  CHECK_FALSE(second_token.cancelled());
}

TEST_CASE("a call watched is first probed an interval later: watching does not start a round",
          "[sidecar_proxy][concurrency]") {
  FakeClients clients;
  // Rounds an hour apart: after the first round (which finds nothing), none is due during the test.
  CallWatcher<int> watcher(clients.Probe(), std::chrono::hours(1));
  CancellationToken first_token;
  std::shared_ptr<void> first = watcher.Watch(1, &first_token);
  // The thread starts with the first call and probes it at once.
  REQUIRE(testing::WaitFor([&] { return clients.Probed(1); }));
  const int rounds = clients.rounds.load();
  // The calls that follow wake no one: a watcher that woke for each of them would probe them all.
  std::vector<CancellationToken> tokens(8);
  std::vector<std::shared_ptr<void>> handles;
  for (int i = 0; i < 8; ++i) handles.push_back(watcher.Watch(10 + i, &tokens[i]));
  std::this_thread::sleep_for(milliseconds(200));
  CHECK(clients.rounds.load() == rounds);
  CHECK_FALSE(clients.Probed(10));
  // Destroying the watcher does not wait for the round an hour away.
}

TEST_CASE("a watcher with nothing to watch sleeps, and the next call wakes it",
          "[sidecar_proxy][concurrency]") {
  FakeClients clients;
  CallWatcher<int> watcher(clients.Probe(), milliseconds(1));
  {
    CancellationToken token;
    std::shared_ptr<void> first = watcher.Watch(1, &token);
    REQUIRE(testing::WaitFor([&] { return clients.Probed(1); }));
  }
  // Nothing watched for two rounds: the thread sleeps until a call is watched, and that call
  // wakes it (a lost wake-up would leave the client's leaving unnoticed).
  std::this_thread::sleep_for(milliseconds(50));
  CancellationToken second_token;
  std::shared_ptr<void> second = watcher.Watch(2, &second_token);
  clients.Leave(2);
  REQUIRE(testing::WaitFor([&] { return second_token.cancelled(); }));
}

TEST_CASE("the proxy's probe reports exactly the sockets whose peer closed",
          "[sidecar_proxy][concurrency]") {
  int open_pair[2], closed_pair[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, open_pair) == 0);
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, closed_pair) == 0);
  CHECK(ClosedByPeer({open_pair[0], closed_pair[0]}).empty());
  ::close(closed_pair[1]);
  CHECK(ClosedByPeer({open_pair[0], closed_pair[0]}) == std::vector<size_t>{1});
  // Through the watcher, as the proxy uses it.
  CallWatcher<int> watcher(ClosedByPeer, milliseconds(1));
  CancellationToken open_token, closed_token;
  std::shared_ptr<void> a = watcher.Watch(open_pair[0], &open_token);
  std::shared_ptr<void> b = watcher.Watch(closed_pair[0], &closed_token);
  REQUIRE(testing::WaitFor([&] { return closed_token.cancelled(); }));
  CHECK_FALSE(open_token.cancelled());
  a.reset();
  b.reset();
  for (int fd : {open_pair[0], open_pair[1], closed_pair[0]}) ::close(fd);
}

}  // namespace
}  // namespace strata::sidecar
