// How strata-sidecar's HTTP listener reads its connections (http_connection.h).
#include "http_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "call_watcher.h"
#include "proxy.h"

namespace strata::sidecar {
namespace {

using Clock = std::chrono::steady_clock;

// A value from the request, quoted for a message: printable ASCII kept, other bytes as \xNN, cut
// after 60 characters.
std::string Quoted(std::string_view value) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (size_t i = 0; i < value.size() && i < 60; ++i) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (value.size() > 60) out += "...";
  return out + "\"";
}

bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

HeadVerdict Refuse(int status, std::string code, std::string message) {
  return HeadVerdict{status, std::move(code), std::move(message)};
}

HeadVerdict BadRequest(std::string message) {
  return Refuse(400, "invalid_argument", std::move(message) + " (RFC 9112)");
}

HeadVerdict CheckRequestLine(std::string_view line, const ConnectionLimits& limits, bool* http10) {
  if (line.size() > limits.max_request_line) {
    return Refuse(414, "uri_too_long",
                  "the request line has " + std::to_string(line.size()) +
                      " bytes, above the sidecar's limit of " +
                      std::to_string(limits.max_request_line) + ": use a shorter URL");
  }
  const size_t first = line.find(' ');
  const size_t last = line.rfind(' ');
  if (first == std::string_view::npos || first == last || first == 0) {
    return BadRequest("the request line " + Quoted(line) + " is not METHOD TARGET HTTP-VERSION");
  }
  const std::string_view method = line.substr(0, first);
  const std::string_view target = line.substr(first + 1, last - first - 1);
  const std::string_view version = line.substr(last + 1);
  if (!std::all_of(method.begin(), method.end(), IsTokenChar) || target.empty() ||
      target.find_first_of(" \t") != std::string_view::npos ||
      (version != "HTTP/1.1" && version != "HTTP/1.0")) {
    return BadRequest("the request line " + Quoted(line) +
                      " is not METHOD TARGET HTTP/1.1 (single spaces, a token method)");
  }
  for (char c : target) {
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      return BadRequest("the request target " + Quoted(target) +
                        " has a byte that must be percent-encoded");
    }
  }
  *http10 = version == "HTTP/1.0";
  return {};
}

// The field lines' values by lower-cased name, or the refusal of a malformed line.
HeadVerdict SplitFields(std::string_view fields,
                        std::multimap<std::string, std::string_view>* out) {
  size_t number = 0;
  while (!fields.empty()) {
    const size_t end = fields.find("\r\n");
    const std::string_view line = fields.substr(0, end);
    fields.remove_prefix(end == std::string_view::npos ? fields.size() : end + 2);
    ++number;
    const std::string at = "header line " + std::to_string(number) + " " + Quoted(line);
    if (line.front() == ' ' || line.front() == '\t') {
      return BadRequest(at +
                        " starts with whitespace: folded header lines (obs-fold) are not "
                        "accepted; send each field on one line");
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return BadRequest(at + " is not NAME: VALUE");
    }
    const std::string_view name = line.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), IsTokenChar)) {
      return BadRequest(at + ": the field name is not a token (no whitespace before the colon)");
    }
    const std::string_view value = TrimOws(line.substr(colon + 1));
    for (char c : value) {
      const unsigned char u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\t') || u == 0x7f) {
        return BadRequest(at + ": the value holds a control character");
      }
    }
    out->emplace(Lower(name), value);
  }
  return {};
}

HeadVerdict CheckContentLength(const std::multimap<std::string, std::string_view>& fields,
                               const ConnectionLimits& limits) {
  auto [begin, end] = fields.equal_range("content-length");
  std::string_view first;
  for (auto it = begin; it != end; ++it) {
    const std::string_view value = it->second;
    if (value.empty() || value.find_first_not_of("0123456789") != std::string_view::npos) {
      return BadRequest("Content-Length " + Quoted(value) + " is not a number of bytes");
    }
    if (it != begin && value != first) {
      return BadRequest("two different Content-Length values, " + Quoted(first) + " and " +
                        Quoted(value) + ": send one");
    }
    first = value;
    const bool too_big =
        value.size() > 18 || std::stoll(std::string(value)) > limits.max_body_bytes;
    if (too_big) {
      return Refuse(413, "invalid_argument",
                    "Content-Length " + std::string(value.substr(0, 30)) +
                        " is above the sidecar's limit of " +
                        std::to_string(limits.max_body_bytes) +
                        " bytes (the largest tenant max_request_bytes)");
    }
  }
  return {};
}

HeadVerdict CheckFraming(const std::multimap<std::string, std::string_view>& fields, bool http10,
                         const ConnectionLimits& limits) {
  const size_t encodings = fields.count("transfer-encoding");
  if (encodings > 0) {
    const std::string_view value = fields.find("transfer-encoding")->second;
    if (encodings > 1) return BadRequest("more than one Transfer-Encoding field: send one");
    if (fields.count("content-length") > 0) {
      return BadRequest("both Transfer-Encoding and Content-Length: send one of them");
    }
    if (http10) return BadRequest("Transfer-Encoding in an HTTP/1.0 request");
    if (Lower(value) != "chunked") {
      return BadRequest("Transfer-Encoding " + Quoted(value) +
                        " is not supported: send \"chunked\" alone, or a Content-Length");
    }
  }
  HeadVerdict length = CheckContentLength(fields, limits);
  if (length.status != 0) return length;
  for (const char* single : {"host", "authorization", "x-strata-agent"}) {
    if (fields.count(single) > 1) {
      return BadRequest("more than one " + std::string(single) + " field: send one");
    }
  }
  return {};
}

}  // namespace

HeadVerdict CheckRequestHead(std::string_view head, const ConnectionLimits& limits) {
  if (head.size() > limits.max_head_bytes) {
    return Refuse(431, "request_header_fields_too_large",
                  "the request head has more than " + std::to_string(limits.max_head_bytes) +
                      " bytes: send fewer or shorter header fields");
  }
  if (head.size() < 4 || head.substr(head.size() - 4) != "\r\n\r\n") {
    return BadRequest("the request head does not end with an empty line");
  }
  head.remove_suffix(2);  // the last field line keeps its CRLF
  // Every line ends with CRLF: a CR or LF anywhere else is refused.
  for (size_t i = 0; i < head.size(); ++i) {
    const bool crlf = head[i] == '\r' && i + 1 < head.size() && head[i + 1] == '\n';
    if (crlf) {
      ++i;
    } else if (head[i] == '\r' || head[i] == '\n') {
      return BadRequest("a bare CR or LF at byte " + std::to_string(i) +
                        " of the request head: end each line with CRLF");
    }
  }
  const size_t line_end = head.find("\r\n");
  bool http10 = false;
  HeadVerdict line = CheckRequestLine(head.substr(0, line_end), limits, &http10);
  if (line.status != 0) return line;
  std::string_view rest = head.substr(line_end + 2);
  if (rest.size() >= 2) rest.remove_suffix(2);  // the CRLF of the last field line
  std::multimap<std::string, std::string_view> fields;
  HeadVerdict split = SplitFields(rest, &fields);
  if (split.status != 0) return split;
  return CheckFraming(fields, http10, limits);
}

namespace {

// ------------------------------------------------------------------------------------ I/O

enum class Wait { kNone, kRead, kWrite };

// One connection's bytes, plaintext or TLS, on a non-blocking socket.
class Transport {
 public:
  virtual ~Transport() = default;
  // > 0: bytes; 0: the peer closed; < 0: an error, or *wait says what to wait for.
  virtual ssize_t Recv(char* data, size_t size, Wait* wait) = 0;
  virtual ssize_t Send(const char* data, size_t size, Wait* wait) = 0;
  virtual bool Pending() const { return false; }  // bytes decrypted, not read yet
  virtual void Close() {}
  virtual const SSL* ssl() const { return nullptr; }
};

class PlainTransport final : public Transport {
 public:
  explicit PlainTransport(int fd) : fd_(fd) {}
  ssize_t Recv(char* data, size_t size, Wait* wait) override {
    const ssize_t n = ::recv(fd_, data, size, 0);
    *wait = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? Wait::kRead
                                                                                 : Wait::kNone;
    return n;
  }
  ssize_t Send(const char* data, size_t size, Wait* wait) override {
    const ssize_t n = ::send(fd_, data, size, MSG_NOSIGNAL);
    *wait = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? Wait::kWrite
                                                                                 : Wait::kNone;
    return n;
  }

 private:
  int fd_;
};

class TlsTransport final : public Transport {
 public:
  explicit TlsTransport(SSL* ssl) : ssl_(ssl) {}
  ~TlsTransport() override { SSL_free(ssl_); }
  ssize_t Recv(char* data, size_t size, Wait* wait) override {
    const int n = SSL_read(ssl_, data, static_cast<int>(std::min<size_t>(size, INT32_MAX)));
    return Result(n, wait);
  }
  ssize_t Send(const char* data, size_t size, Wait* wait) override {
    const int n = SSL_write(ssl_, data, static_cast<int>(std::min<size_t>(size, INT32_MAX)));
    return Result(n, wait);
  }
  bool Pending() const override { return SSL_pending(ssl_) > 0; }
  void Close() override { SSL_shutdown(ssl_); }
  const SSL* ssl() const override { return ssl_; }

 private:
  ssize_t Result(int n, Wait* wait) {
    *wait = Wait::kNone;
    if (n > 0) return n;
    const int error = SSL_get_error(ssl_, n);
    if (error == SSL_ERROR_WANT_READ) *wait = Wait::kRead;
    if (error == SSL_ERROR_WANT_WRITE) *wait = Wait::kWrite;
    return error == SSL_ERROR_ZERO_RETURN ? 0 : -1;
  }
  SSL* ssl_;
};

// Waits until `fd` is ready for `wait`, `deadline` passes (false) or `stopping()` (false), in
// slices of 100 ms so that a stopping server is noticed.
template <typename Stopping>
bool WaitFor(int fd, Wait wait, Clock::time_point deadline, const Stopping& stopping) {
  while (!stopping()) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, static_cast<short>(wait == Wait::kWrite ? POLLOUT : POLLIN), 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 100)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
  return false;
}

// The peer's (`peer`) or the local address of a socket.
void SocketAddress(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage address{};
  socklen_t size = sizeof(address);
  auto* raw = reinterpret_cast<sockaddr*>(&address);
  if ((peer ? ::getpeername(fd, raw, &size) : ::getsockname(fd, raw, &size)) != 0) return;
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
    port = ntohs(v4->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    port = ntohs(v6->sin6_port);
  }
  ip = text;
}

// What ReadHead found.
enum class HeadRead { kComplete, kClosed, kTimeout, kTooLong };

// ------------------------------------------------------------------------------------ streams

// A connection as cpp-httplib's Stream: the head already read is served from the buffer first.
class Connection final : public httplib::Stream {
 public:
  Connection(int fd, std::unique_ptr<Transport> transport, const ConnectionLimits& limits,
             std::function<bool()> stopping)
      : fd_(fd),
        transport_(std::move(transport)),
        limits_(limits),
        stopping_(std::move(stopping)) {}

  Transport& transport() { return *transport_; }
  bool Buffered() const { return pos_ < buffer_.size() || transport_->Pending(); }

  // Waits until the next request starts, for at most `timeout`: false when none came.
  bool WaitForRequest(std::chrono::milliseconds timeout) {
    if (Buffered()) return true;
    return WaitFor(fd_, Wait::kRead, Clock::now() + timeout, stopping_);
  }

  // Reads until the buffer holds a whole head (its length in *size), by `deadline`.
  HeadRead ReadHead(Clock::time_point deadline, size_t* size) {
    for (;;) {
      const std::string_view data = std::string_view(buffer_).substr(pos_);
      const size_t end = data.find("\r\n\r\n");
      if (end != std::string_view::npos) {
        *size = end + 4;
        return HeadRead::kComplete;
      }
      const size_t line = data.find("\r\n");
      if ((line == std::string_view::npos && data.size() > limits_.max_request_line) ||
          data.size() > limits_.max_head_bytes) {
        *size = data.size();
        return HeadRead::kTooLong;
      }
      const ssize_t n = Fill(deadline);
      if (n == 0) return HeadRead::kClosed;
      if (n < 0) return Clock::now() >= deadline ? HeadRead::kTimeout : HeadRead::kClosed;
    }
  }
  std::string_view Head(size_t size) const { return std::string_view(buffer_).substr(pos_, size); }

  // Writes a whole reply (status line, JSON error) and closes; with `linger`, gently: the
  // client's rest is read and dropped for up to a second, so that the reply is not lost to a
  // reset.
  void Refuse(int status, const std::string& reason, const std::string& code,
              const std::string& message, bool linger = true) {
    const std::string body = OpenAiErrorJson(message, "invalid_request_error", code);
    const std::string reply =
        "HTTP/1.1 " + std::to_string(status) + " " + reason +
        "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
        "\r\nConnection: close\r\n\r\n" + body;
    write(reply.data(), reply.size());
    Flush();
    transport_->Close();
    ::shutdown(fd_, SHUT_WR);
    if (!linger) return;
    const Clock::time_point until = Clock::now() + std::chrono::seconds(1);
    char scratch[4096];
    for (size_t dropped = 0; dropped < (1u << 20);) {
      if (!WaitFor(fd_, Wait::kRead, until, stopping_)) break;
      const ssize_t n = ::recv(fd_, scratch, sizeof(scratch), 0);
      if (n <= 0) break;
      dropped += static_cast<size_t>(n);
    }
  }

  // httplib::Stream
  bool is_readable() const override {
    return Buffered() || WaitFor(fd_, Wait::kRead, Clock::now() + limits_.io_timeout, stopping_);
  }
  bool is_writable() const override {
    pollfd p{fd_, static_cast<short>(POLLOUT | POLLRDHUP), 0};
    const int n = ::poll(&p, 1, static_cast<int>(limits_.io_timeout.count()));
    return n > 0 && (p.revents & POLLOUT) && !(p.revents & (POLLRDHUP | POLLHUP | POLLERR));
  }
  ssize_t read(char* ptr, size_t size) override {
    if (!Flush()) return -1;  // a held head (an interim 100 Continue) goes before any wait
    if (pos_ >= buffer_.size()) {
      buffer_.clear();
      pos_ = 0;
      const ssize_t n = Fill(Clock::now() + limits_.io_timeout);
      if (n <= 0) return n == 0 ? 0 : -1;
    }
    const size_t n = std::min(size, buffer_.size() - pos_);
    std::copy_n(buffer_.data() + pos_, n, ptr);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  // cpp-httplib writes a reply's head and its body (or first chunk) in two calls: the head is
  // held and goes out with what follows it, in one send, so that the client is not woken for a
  // head whose body comes a moment later. What is held goes out before a read (an interim
  // "100 Continue" precedes the body it asks for) and when the request is done (Flush).
  ssize_t write(const char* ptr, size_t size) override {
    const std::string_view data(ptr, size);
    if (held_.empty() && data.rfind("HTTP/1.", 0) == 0 && size >= 4 &&
        data.substr(size - 4) == "\r\n\r\n") {
      held_.assign(data);
      return static_cast<ssize_t>(size);
    }
    if (!held_.empty() && size <= kJoinedBytes) {
      held_.append(data);
      return Flush() ? static_cast<ssize_t>(size) : -1;
    }
    return Flush() && SendAll(data) ? static_cast<ssize_t>(size) : -1;
  }
  // Sends what write() held; false when the connection failed.
  bool Flush() {
    if (held_.empty()) return true;
    const bool sent = SendAll(held_);
    held_.clear();
    return sent;
  }
  // cpp-httplib asks for both addresses at every request: read once per connection (a socket's
  // addresses do not change while it is open).
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Addresses(true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Addresses(false, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  // Reads what the socket has into the buffer, waiting until `deadline`: > 0 bytes, 0 closed,
  // -1 error or deadline.
  ssize_t Fill(Clock::time_point deadline) {
    char chunk[16384];
    for (;;) {
      Wait wait = Wait::kNone;
      const ssize_t n = transport_->Recv(chunk, sizeof(chunk), &wait);
      if (n > 0) {
        if (pos_ > 0 && pos_ == buffer_.size()) {
          buffer_.clear();
          pos_ = 0;
        }
        buffer_.append(chunk, static_cast<size_t>(n));
        return n;
      }
      if (n == 0) return 0;
      if (wait == Wait::kNone || !WaitFor(fd_, wait, deadline, stopping_)) return -1;
    }
  }

  struct Address {
    bool read = false;
    std::string ip;
    int port = 0;
  };
  void Addresses(bool peer, std::string& ip, int& port) const {
    Address& address = peer ? peer_ : local_;
    if (!address.read) {
      SocketAddress(fd_, peer, address.ip, address.port);
      address.read = true;
    }
    ip = address.ip;
    port = address.port;
  }

  bool SendAll(std::string_view data) {
    size_t sent = 0;
    while (sent < data.size()) {
      Wait wait = Wait::kNone;
      const ssize_t n = transport_->Send(data.data() + sent, data.size() - sent, &wait);
      if (n > 0) {
        sent += static_cast<size_t>(n);
      } else if (wait == Wait::kNone ||
                 !WaitFor(fd_, wait, Clock::now() + limits_.io_timeout, stopping_)) {
        return false;
      }
    }
    return true;
  }

  // A body up to this size is copied after the held head and sent with it; a larger one follows
  // the head in a second send.
  static constexpr size_t kJoinedBytes = 64 * 1024;

  int fd_;
  mutable Address peer_, local_;  // as the socket gave them, once asked for
  std::string held_;              // a reply's head, until what follows it (write)
  std::unique_ptr<Transport> transport_;
  const ConnectionLimits& limits_;
  std::function<bool()> stopping_;
  std::string buffer_;  // bytes read and not yet given to cpp-httplib from pos_ on
  size_t pos_ = 0;
};

// ------------------------------------------------------------------------------------ clients

// Connections per client address.
class ClientCounter {
 public:
  // Counts a connection of `address`; false (and nothing counted) at `max`.
  bool Admit(const std::string& address, int max) {
    std::lock_guard<std::mutex> lock(mu_);
    int& n = counts_[address];
    if (max > 0 && n >= max) return false;
    ++n;
    return true;
  }
  void Release(const std::string& address) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = counts_.find(address);
    if (it != counts_.end() && --it->second <= 0) counts_.erase(it);
  }

 private:
  std::mutex mu_;
  std::map<std::string, int> counts_;  // guarded by mu_
};

using DisconnectWatcher = CallWatcher<int>;

// The request this thread handles: what CurrentClientWatch() watches.
struct CurrentRequest {
  DisconnectWatcher* watcher = nullptr;
  int fd = -1;
};
thread_local CurrentRequest current_request;

// Answers go out as soon as they are written: without TCP_NODELAY, Nagle's algorithm holds a
// reply's last segment back until the client acknowledges the one before, which a client delays
// (delayed ACK) by up to 40 ms.
void SetNoDelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

bool SetNonBlocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

std::string PeerAddress(int fd) {
  std::string ip;
  int port = 0;
  SocketAddress(fd, true, ip, port);
  return ip;
}

const char* Reason(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Error";
  }
}

// A cpp-httplib server (Base: httplib::Server or httplib::SSLServer) that reads each connection
// itself (http_connection.h) and hands cpp-httplib one checked request head at a time.
template <typename Base>
class GuardedServer final : public Base {
 public:
  template <typename... Args>
  explicit GuardedServer(const ConnectionLimits& limits, Args&&... args)
      : Base(std::forward<Args>(args)...), limits_(limits) {}

  // Listening again on a listening socket changes its backlog (Linux, BSD).
  void Relisten(int backlog) {
    if (this->svr_sock_ != INVALID_SOCKET) ::listen(this->svr_sock_, backlog);
  }

 private:
  bool Stopping() const { return this->svr_sock_ == INVALID_SOCKET; }

  // cpp-httplib calls this on a thread of its pool for each accepted connection.
  bool process_and_close_socket(socket_t sock) override {
    SetNoDelay(sock);
    const std::string address = PeerAddress(sock);
    bool served = false;
    if (!clients_.Admit(address, limits_.max_per_client)) {
      Connection refused(sock, std::make_unique<PlainTransport>(sock), limits_,
                         [this] { return Stopping(); });
      if constexpr (std::is_same_v<Base, httplib::Server>) {
        refused.Refuse(429, Reason(429), "too_many_connections",
                       "the client " + address + " has " + std::to_string(limits_.max_per_client) +
                           " connections open, the sidecar's limit "
                           "http_max_connections_per_client: reuse or close one",
                       /*linger=*/false);
      }
    } else {
      if (SetNonBlocking(sock)) {
        std::unique_ptr<Transport> transport = Accept(sock);
        if (transport) served = Serve(sock, std::move(transport));
      }
      clients_.Release(address);
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return served;
  }

  // The connection's transport: plaintext, or TLS once its handshake ends within head_timeout.
  std::unique_ptr<Transport> Accept(int sock) {
    if constexpr (std::is_same_v<Base, httplib::Server>) {
      return std::make_unique<PlainTransport>(sock);
    } else {
      SSL* ssl = SSL_new(this->ssl_context());
      if (ssl == nullptr) return nullptr;
      auto transport = std::make_unique<TlsTransport>(ssl);
      SSL_set_fd(ssl, sock);
      const Clock::time_point deadline = Clock::now() + limits_.head_timeout;
      for (;;) {
        const int n = SSL_accept(ssl);
        if (n == 1) return transport;
        const int error = SSL_get_error(ssl, n);
        const Wait wait = error == SSL_ERROR_WANT_READ    ? Wait::kRead
                          : error == SSL_ERROR_WANT_WRITE ? Wait::kWrite
                                                          : Wait::kNone;
        if (wait == Wait::kNone || !WaitFor(sock, wait, deadline, [this] { return Stopping(); })) {
          return nullptr;
        }
      }
    }
  }

  HeadVerdict Judge(HeadRead read, std::string_view head) const {
    if (read == HeadRead::kTimeout) {
      return {408, "request_timeout",
              "the request head did not arrive within " +
                  std::to_string(limits_.head_timeout.count()) +
                  " ms (the sidecar's http_head_timeout_ms): send it whole"};
    }
    if (read == HeadRead::kTooLong && head.find("\r\n") == std::string_view::npos) {
      return {414, "uri_too_long",
              "the request line has more than " + std::to_string(limits_.max_request_line) +
                  " bytes, the sidecar's limit: use a shorter URL"};
    }
    if (read == HeadRead::kTooLong) {
      return {431, "request_header_fields_too_large",
              "the request head has more than " + std::to_string(limits_.max_head_bytes) +
                  " bytes: send fewer or shorter header fields"};
    }
    return CheckRequestHead(head, limits_);
  }

  // The connection's requests, one after the other (keep-alive), each head checked first.
  bool Serve(int sock, std::unique_ptr<Transport> transport) {
    const SSL* ssl = transport->ssl();
    Connection conn(sock, std::move(transport), limits_, [this] { return Stopping(); });
    Clock::time_point start = Clock::now();
    bool ok = true;
    for (size_t count = this->keep_alive_max_count_; count > 0 && !Stopping(); --count) {
      const bool first = count == this->keep_alive_max_count_;
      if (!first && !conn.WaitForRequest(limits_.keep_alive_timeout)) break;
      size_t size = 0;
      const HeadRead read = conn.ReadHead(start + limits_.head_timeout, &size);
      if (read == HeadRead::kClosed) break;
      const HeadVerdict verdict = Judge(read, conn.Head(size));
      if (verdict.status != 0) {
        conn.Refuse(verdict.status, Reason(verdict.status), verdict.code, verdict.message);
        return false;
      }
      current_request = {&watcher_, sock};
      bool closed = false;
      ok = this->process_request(conn, count == 1, closed,
                                 [ssl](httplib::Request& req) { req.ssl = ssl; });
      ok = conn.Flush() && ok;  // a reply without a body: its head
      current_request = {};
      if (!ok || closed) break;
      start = Clock::now();
    }
    conn.transport().Close();
    return ok;
  }

  ConnectionLimits limits_;
  ClientCounter clients_;
  DisconnectWatcher watcher_{ClosedByPeer, std::chrono::milliseconds(50)};
};

}  // namespace

StatusOr<std::unique_ptr<httplib::Server>> MakeGuardedServer(const TlsConfig& tls,
                                                             const ConnectionLimits& limits) {
  if (!tls.enabled())
    return std::unique_ptr<httplib::Server>(new GuardedServer<httplib::Server>(limits));
  auto server = std::make_unique<GuardedServer<httplib::SSLServer>>(
      limits, tls.cert_file.c_str(), tls.key_file.c_str(),
      tls.client_ca_file.empty() ? nullptr : tls.client_ca_file.c_str());
  if (!server->is_valid()) {
    return UnavailableError("the HTTP listener's TLS setup failed: tls.cert_file \"" +
                            tls.cert_file + "\" and tls.key_file \"" + tls.key_file +
                            "\" must be a PEM certificate chain and its private key");
  }
  return std::unique_ptr<httplib::Server>(std::move(server));
}

void WidenListenBacklog(httplib::Server& server) {
  if (auto* plain = dynamic_cast<GuardedServer<httplib::Server>*>(&server)) {
    plain->Relisten(kListenBacklog);
  } else if (auto* tls = dynamic_cast<GuardedServer<httplib::SSLServer>*>(&server)) {
    tls->Relisten(kListenBacklog);
  }
}

std::vector<size_t> ClosedByPeer(const std::vector<int>& sockets) {
  std::vector<pollfd> fds;
  fds.reserve(sockets.size());
  for (int fd : sockets) fds.push_back(pollfd{fd, static_cast<short>(POLLRDHUP), 0});
  std::vector<size_t> closed;
  if (::poll(fds.data(), fds.size(), 0) <= 0) return closed;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) closed.push_back(i);
  }
  return closed;
}

ClientWatch CurrentClientWatch() {
  const CurrentRequest request = current_request;
  if (request.watcher == nullptr) return {};
  return [request](CancellationToken* token) { return request.watcher->Watch(request.fd, token); };
}

}  // namespace strata::sidecar
