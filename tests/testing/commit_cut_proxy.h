// A TCP proxy in front of a PostgreSQL server that cuts a connection at its COMMIT: a lost
// connection at the one moment where a client cannot know whether its write committed, made
// deterministic.
//
//   testing::CommitCutProxy proxy(testing::SharedPostgres().port());
//   auto store = OpenStore(proxy.Url("t1"));
//   proxy.Arm(testing::CommitCutProxy::Cut::kAfterCommit);  // the next COMMIT's answer is lost
//   Status status = (*store)->AppendRequest(record);
//
// It passes bytes through unchanged until armed. The next connection to send the simple query
// COMMIT (libpq's PQexec("COMMIT")) is then closed on both sides: kBeforeCommit drops the COMMIT
// (the server never receives it and rolls the transaction back when the connection ends);
// kAfterCommit forwards it, waits for the server's answer (sent once the transaction committed)
// and drops that instead. One cut per Arm. RefuseNew(true) closes every connection made from then
// on at once, as an unreachable server would. Servers in tests bind 127.0.0.1, port 0.
#ifndef STRATA_TESTS_TESTING_COMMIT_CUT_PROXY_H_
#define STRATA_TESTS_TESTING_COMMIT_CUT_PROXY_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace strata::testing {

class CommitCutProxy {
 public:
  enum class Cut { kNone, kBeforeCommit, kAfterCommit };

  explicit CommitCutProxy(int server_port) : server_port_(server_port) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(listener_ >= 0);
    sockaddr_in address = Loopback(0);
    socklen_t length = sizeof(address);
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
    REQUIRE(::listen(listener_, 64) == 0);
    REQUIRE(::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }
  ~CommitCutProxy() {
    stop_ = true;
    acceptor_.join();
    std::vector<std::thread> relays;
    {
      std::lock_guard<std::mutex> lock(mu_);
      relays.swap(relays_);
    }
    for (std::thread& relay : relays) relay.join();
    ::close(listener_);
  }
  CommitCutProxy(const CommitCutProxy&) = delete;
  CommitCutProxy& operator=(const CommitCutProxy&) = delete;

  // The URL of database `name` through the proxy.
  std::string Url(const std::string& name) const {
    return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/" + name;
  }
  void Arm(Cut cut) { armed_ = cut; }
  void RefuseNew(bool refuse) { refuse_new_ = refuse; }
  int cuts() const { return cuts_; }          // connections cut at a COMMIT
  int accepted() const { return accepted_; }  // connections passed through
  int refused() const { return refused_; }    // connections closed at once (RefuseNew)

 private:
  static sockaddr_in Loopback(int port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    return address;
  }

  void AcceptLoop() {
    while (!stop_) {
      pollfd ready{listener_, POLLIN, 0};
      if (::poll(&ready, 1, 20) <= 0) continue;
      const int client = ::accept(listener_, nullptr, nullptr);
      if (client < 0) continue;
      if (refuse_new_) {
        ++refused_;
        ::close(client);
        continue;
      }
      const int server = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in address = Loopback(server_port_);
      if (::connect(server, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
        ::close(server);
        ::close(client);
        continue;
      }
      ++accepted_;
      std::lock_guard<std::mutex> lock(mu_);
      relays_.emplace_back([this, client, server] { Relay(client, server); });
    }
  }

  // True when `data` holds the simple query COMMIT: 'Q', its length (4 + 7), "COMMIT\0".
  static bool HoldsCommit(const std::string& data) {
    static const std::string kCommit("Q\0\0\0\x0b" "COMMIT\0", 12);
    return data.find(kCommit) != std::string::npos;
  }

  void Relay(int client, int server) {
    char buffer[65536];
    bool open = true;
    while (open && !stop_) {
      pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (::poll(fds, 2, 20) <= 0) continue;
      for (int i = 0; i < 2 && open; ++i) {
        if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        const int from = fds[i].fd;
        const int to = i == 0 ? server : client;
        const ssize_t n = ::read(from, buffer, sizeof(buffer));
        if (n <= 0) {
          open = false;
          break;
        }
        const std::string data(buffer, static_cast<size_t>(n));
        if (i == 0 && HoldsCommit(data)) {
          const Cut cut = armed_.exchange(Cut::kNone);
          if (cut == Cut::kAfterCommit) {
            WriteAll(to, data);
            pollfd answer{server, POLLIN, 0};
            ::poll(&answer, 1, 30000);  // the answer comes once the transaction committed
          }
          if (cut != Cut::kNone) {
            ++cuts_;
            open = false;
            break;
          }
        }
        if (!WriteAll(to, data)) open = false;
      }
    }
    ::close(client);
    ::close(server);
  }

  static bool WriteAll(int fd, const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

  const int server_port_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<Cut> armed_{Cut::kNone};
  std::atomic<bool> refuse_new_{false};
  std::atomic<int> cuts_{0};
  std::atomic<int> accepted_{0};
  std::atomic<int> refused_{0};
  std::mutex mu_;
  std::vector<std::thread> relays_;  // guarded by mu_
  std::thread acceptor_;
};

}  // namespace strata::testing

#endif  // STRATA_TESTS_TESTING_COMMIT_CUT_PROXY_H_
