// A raw HTTP/1.1 server for transport tests that need byte-level control of an answer (headers at
// once and the body later, SSE without separators, endless streams, hostile error bodies): it
// accepts on 127.0.0.1 port 0, reads each request (head + Content-Length body) and hands the
// socket to a handler that writes whatever it likes. One connection at a time, closed after each
// request. Not a general server.
//
//   RawHttpServer server([](int fd, const RawRequest& request) {
//     RawHttpServer::Write(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n");
//     ...
//   });
//   std::string base = server.base_url();  // "http://127.0.0.1:<port>/v1"
#ifndef STRATA_TESTS_INTEGRATION_TRANSPORT_RAW_HTTP_SERVER_H_
#define STRATA_TESTS_INTEGRATION_TRANSPORT_RAW_HTTP_SERVER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace strata::testing {

struct RawRequest {
  std::string head;  // request line and headers, CRLF-separated
  std::string body;
};

class RawHttpServer {
 public:
  using Handler = std::function<void(int fd, const RawRequest& request)>;

  explicit RawHttpServer(Handler handler) : handler_(std::move(handler)) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = 0;
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(listen_fd_, 16) != 0) {
      std::abort();
    }
    socklen_t len = sizeof(addr);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }

  ~RawHttpServer() {
    stopping_ = true;
    shutdown(listen_fd_, SHUT_RDWR);
    close(listen_fd_);
    thread_.join();
  }

  int port() const { return port_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  // Requests received so far.
  std::vector<RawRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  // True once stop() was called or the destructor runs: long-running handlers poll it.
  bool stopping() const { return stopping_.load(); }

  // Writes all of `data`; false when the peer is gone.
  static bool Write(int fd, const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  // Blocks until the peer closes the connection (or the server stops): a handler that must not
  // answer until the client gave up, e.g. on a timeout the test expects. True when the peer closed.
  bool WaitForHangUp(int fd) const {
    char buf[4096];
    while (!stopping()) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      if (recv(fd, buf, sizeof(buf), 0) <= 0) return true;
    }
    return false;
  }

  // Raw bytes of a request sent to `port` and everything read back until the server closes.
  static std::string Exchange(int port, const std::string& request, int timeout_ms = 5000) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    std::string out;
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && Write(fd, request)) {
      char buf[65536];
      pollfd p{fd, POLLIN, 0};
      while (poll(&p, 1, timeout_ms) > 0) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n <= 0) break;
        out.append(buf, static_cast<size_t>(n));
      }
    }
    close(fd);
    return out;
  }

 private:
  void Loop() {
    while (!stopping_) {
      int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      RawRequest request;
      std::string buffer;
      char chunk[65536];
      size_t head_end;
      bool ok = true;
      while ((head_end = buffer.find("\r\n\r\n")) == std::string::npos) {
        ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
        if (n <= 0) {
          ok = false;
          break;
        }
        buffer.append(chunk, static_cast<size_t>(n));
      }
      if (ok) {
        request.head = buffer.substr(0, head_end);
        buffer.erase(0, head_end + 4);
        size_t length = 0;
        std::string lower = request.head;
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        size_t at = lower.find("content-length:");
        if (at != std::string::npos) length = std::strtoull(lower.c_str() + at + 15, nullptr, 10);
        while (buffer.size() < length) {
          ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
          if (n <= 0) break;
          buffer.append(chunk, static_cast<size_t>(n));
        }
        request.body = buffer.substr(0, length);
        {
          std::lock_guard<std::mutex> lock(mu_);
          requests_.push_back(request);
        }
        handler_(fd, request);
      }
      shutdown(fd, SHUT_RDWR);
      close(fd);
    }
  }

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<RawRequest> requests_;  // guarded by mu_
};

}  // namespace strata::testing

#endif  // STRATA_TESTS_INTEGRATION_TRANSPORT_RAW_HTTP_SERVER_H_
