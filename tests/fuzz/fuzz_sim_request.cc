// strata-sim's request parser: the input is sent as raw bytes (HTTP/1.1 request head and body) to
// an in-process SimServer with the GLM-5.3 chat template, over a loopback connection that the
// harness then half-closes. The server must answer (any status) and close the connection: a crash
// or an exception escaping a connection thread ends the process, and a connection that stays open
// 20 s after the input was sent is a finding too (a parked thread). Fault headers are renamed
// before sending (a fault such as slow-first-byte delays the answer on purpose).
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <memory>
#include <string>

#include "fuzz_util.h"
#include "sim_server.h"
#include "strata/chat_template.h"

namespace {

strata::sim::SimServer& Server() {
  static strata::sim::SimServer* server = [] {
    static std::unique_ptr<strata::ChatTemplate> glm = strata::MakeGlm5ChatTemplate();
    strata::sim::SimOptions options;
    options.chat_template = glm.get();
    options.idle_timeout_ms = 2000;
    options.request_timeout_ms = 5000;
    options.max_request_bytes = 1u << 20;
    options.max_logged_requests = 16;
    auto started = strata::sim::SimServer::Start(options);
    if (!started.ok()) strata::fuzz::Fail("SimServer::Start: " + started.status().ToString());
    return started->release();
  }();
  return *server;
}

// The input with every "x-strata-sim-fault" header name (any case) renamed.
std::string WithoutFaults(std::string_view input) {
  std::string out(input);
  static const std::string kName = "x-strata-sim-fault";
  for (size_t i = 0; i + kName.size() <= out.size(); ++i) {
    bool same = true;
    for (size_t k = 0; k < kName.size() && same; ++k)
      same = std::tolower(static_cast<unsigned char>(out[i + k])) == kName[k];
    if (same) out[i + kName.size() - 1] = 'x';
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  strata::sim::SimServer& server = Server();
  const std::string request = WithoutFaults(strata::fuzz::AsText(data, size));
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) strata::fuzz::Fail("socket()");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server.http_port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) strata::fuzz::Fail("connect()");
  // Send while reading (the server may answer, e.g. 413, before the body is in), then half-close.
  size_t sent = 0;
  bool half_closed = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  char buffer[65536];
  for (;;) {
    if (sent == request.size() && !half_closed) {
      ::shutdown(fd, SHUT_WR);
      half_closed = true;
    }
    pollfd p{fd, static_cast<short>(POLLIN | (half_closed ? 0 : POLLOUT)), 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) strata::fuzz::Fail("strata-sim kept the connection open 20 s after the request");
    if (::poll(&p, 1, static_cast<int>(left.count())) < 0) continue;
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) break;  // closed (or reset) by the server
    }
    if (!half_closed && (p.revents & POLLOUT)) {
      ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n < 0) break;  // the server closed first
      sent += static_cast<size_t>(n);
    }
  }
  ::close(fd);
  return 0;
}
