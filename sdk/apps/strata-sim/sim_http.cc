// strata-sim's HTTP/1.1 server (sim_impl.h): a thread per connection, keep-alive, Content-Length
// bodies only, the connection limits of SimOptions, routing, and answers written whole or as a
// chunked SSE stream.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "sim_impl.h"

namespace strata::sim {

using sim_internal::Lower;
using sim_internal::Plan;

namespace {

std::string Reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Status";
  }
}

}  // namespace

Status SimServer::Impl::StartHttp() {
  listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
  if (listen_fd_ < 0) return UnavailableError(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(options_.http_port));
  if (inet_pton(AF_INET, options_.host.c_str(), &addr.sin_addr) != 1) {
    return InvalidArgumentError("host \"" + options_.host + "\" is not an IPv4 address");
  }
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return UnavailableError("cannot bind " + options_.host + ":" + std::to_string(options_.http_port) + ": " +
                            std::strerror(errno));
  }
  if (listen(listen_fd_, 512) != 0) return UnavailableError(std::string("listen: ") + std::strerror(errno));
  socklen_t len = sizeof(addr);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  http_port_ = ntohs(addr.sin_port);
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  return Status();
}

void SimServer::Impl::AcceptLoop() {
  while (!stopping_.load()) {
    int fd = accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) {
      if (stopping_.load()) break;
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE) {
        Sleep(10000);
        continue;
      }
      break;
    }
    ++connections_;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::lock_guard<std::mutex> lock(conn_mu_);
    ReapLocked();
    if (stopping_.load()) {
      close(fd);
      break;
    }
    if (options_.max_connections > 0 && conn_fds_.size() >= static_cast<size_t>(options_.max_connections)) {
      WriteAll(fd, SimpleResponse(503, ErrorBody(503, "over " + std::to_string(options_.max_connections) +
                                                          " open connections; retry later"),
                                  "Connection: close\r\n"));
      close(fd);
      continue;
    }
    conn_fds_.insert(fd);
    auto it = conn_threads_.emplace(conn_threads_.end());
    *it = std::thread([this, fd, it] {
      // Nothing a client sends may end the process: an exception stops this connection only.
      try {
        ServeConnection(fd);
      } catch (const std::exception& e) {
        WriteAll(fd, SimpleResponse(500, ErrorBody(500, std::string("strata-sim internal error: ") + e.what()),
                                    "Connection: close\r\n"));
      } catch (...) {
      }
      std::lock_guard<std::mutex> lock(conn_mu_);
      conn_fds_.erase(fd);
      close(fd);
      finished_.push_back(it);
    });
  }
}

void SimServer::Impl::ReapLocked() {
  for (auto it : finished_) {
    if (it->joinable()) it->join();
    conn_threads_.erase(it);
  }
  finished_.clear();
}

bool SimServer::Impl::WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return false;
    }
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string SimServer::Impl::SimpleResponse(int status, const std::string& body, const std::string& extra) {
  return "HTTP/1.1 " + std::to_string(status) + " " + Reason(status) +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra +
         "\r\n" + body;
}

bool SimServer::Impl::RecvWithin(int fd, std::string* buffer, int64_t timeout_ms) {
  if (timeout_ms <= 0) return false;
  pollfd p{fd, POLLIN, 0};
  int ready;
  do {
    ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(timeout_ms, INT32_MAX)));
  } while (ready < 0 && errno == EINTR);
  if (ready <= 0) return false;
  char chunk[65536];
  ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
  if (n <= 0) return false;
  buffer->append(chunk, static_cast<size_t>(n));
  return true;
}

std::string SimServer::Impl::ErrorBody(int status, const std::string& message) const {
  Plan plan = ErrorPlan(Plan(), status, message, options_.error_shape,
                                                 status == 413   ? "RequestEntityTooLarge"
                                                 : status == 408 ? "RequestTimeout"
                                                 : status == 503 ? "ServiceUnavailable"
                                                                 : "BadRequestError");
  return plan.error_body;
}

void SimServer::Impl::ServeConnection(int fd) {
  std::string buffer;
  while (!stopping_.load()) {
    // A kept-alive connection may wait idle_timeout_ms for its next request.
    if (buffer.empty() && !RecvWithin(fd, &buffer, options_.idle_timeout_ms)) return;
    HttpRequest request;
    if (!ReadRequest(fd, &buffer, &request)) return;
    if (!Route(fd, request)) return;
    if (Lower(request.headers["connection"]) == "close" || request.version == "HTTP/1.0") return;
  }
}

void SimServer::Impl::ParseHead(const std::string& head, HttpRequest* request) {
  std::istringstream lines(head);
  std::string request_line;
  std::getline(lines, request_line);
  if (!request_line.empty() && request_line.back() == '\r') request_line.pop_back();
  std::istringstream rl(request_line);
  rl >> request->method >> request->target >> request->version;
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    while (!value.empty() && value.back() == ' ') value.pop_back();
    request->headers[Lower(line.substr(0, colon))] = value;
  }
  request->path = request->target.substr(0, request->target.find('?'));
}

bool SimServer::Impl::ReadRequest(int fd, std::string* buffer_in, HttpRequest* request) {
  std::string& buffer = *buffer_in;
  using Clock = std::chrono::steady_clock;
  // From its first byte, the head and the body must arrive within request_timeout_ms.
  const Clock::time_point started = Clock::now();
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
  };
  auto reject = [&](int status, const std::string& message) {
    WriteAll(fd, SimpleResponse(status, ErrorBody(status, message), "Connection: close\r\n"));
    return false;
  };
  size_t header_end;
  while ((header_end = buffer.find("\r\n\r\n")) == std::string::npos) {
    if (buffer.size() > options_.max_header_bytes) {
      return reject(431, "request head over " + std::to_string(options_.max_header_bytes) + " bytes");
    }
    if (!RecvWithin(fd, &buffer, options_.request_timeout_ms - ms_since(started))) {
      if (ms_since(started) >= options_.request_timeout_ms) {
        reject(408, "request head not received within " + std::to_string(options_.request_timeout_ms) + " ms");
      }
      return false;
    }
  }
  if (header_end > options_.max_header_bytes) {
    return reject(431, "request head over " + std::to_string(options_.max_header_bytes) + " bytes");
  }
  ParseHead(buffer.substr(0, header_end), request);
  buffer.erase(0, header_end + 4);
  Headers& headers = request->headers;
  if (headers.count("transfer-encoding") > 0) {
    return reject(411, "strata-sim needs Content-Length (no chunked request bodies)");
  }
  size_t length = 0;
  if (headers.count("content-length") > 0) {
    const std::string& text = headers["content-length"];
    bool digits = !text.empty() && text.size() <= 19 &&
                  std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) return reject(400, "Content-Length \"" + text + "\" is not a non-negative integer");
    length = std::strtoull(text.c_str(), nullptr, 10);
  }
  if (length > options_.max_request_bytes) {
    return reject(413, "request body of " + std::to_string(length) + " bytes is over the limit of " +
                           std::to_string(options_.max_request_bytes) + " bytes");
  }
  if (Lower(headers["expect"]) == "100-continue" && buffer.size() < length) {
    if (!WriteAll(fd, "HTTP/1.1 100 Continue\r\n\r\n")) return false;
  }
  buffer.reserve(length);  // the body is received in place, without regrowing
  while (buffer.size() < length) {
    if (!RecvWithin(fd, &buffer, options_.request_timeout_ms - ms_since(started))) {
      if (ms_since(started) >= options_.request_timeout_ms) {
        reject(408, "request body not received within " + std::to_string(options_.request_timeout_ms) + " ms");
      }
      return false;
    }
  }
  if (buffer.size() == length) {
    request->body.swap(buffer);  // the usual case: nothing after the body (no pipelining)
  } else {
    request->body = buffer.substr(0, length);
    buffer.erase(0, length);
  }
  return true;
}

bool SimServer::Impl::Route(int fd, const HttpRequest& request) {
  const std::string& path = request.path;
  const std::string& method = request.method;
  auto ends_with = [&](const std::string& suffix) {
    return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (method == "GET" && ends_with("/models")) {
    json models = {{"object", "list"}, {"data", json::array({{{"id", "glm-5.3-flash"}, {"object", "model"}}})}};
    return WriteAll(fd, SimpleResponse(200, models.dump()));
  }
  if (method == "GET" && path == "/metrics") return WriteAll(fd, MetricsResponse());
  if (method == "GET" && ends_with("/health")) return WriteAll(fd, SimpleResponse(200, "{}"));
  if (method == "POST" && ends_with("/chat/completions")) {
    return ServeChat(fd, path, request.body, request.headers);
  }
  Plan plan = ErrorPlan(Plan(), 404, "no route for " + method + " " + path, options_.error_shape, "NotFoundError");
  return WriteAll(fd, SimpleResponse(404, plan.error_body));
}

bool SimServer::Impl::ServeChat(int fd, const std::string& path, const std::string& body,
               const std::map<std::string, std::string>& headers) {
  Plan plan = MakePlan("http", path, body, headers);
  // The simulator's own time on this request, for a client to subtract from what it measured.
  const std::string processing =
      "X-Strata-Sim-Processing-Us: " + std::to_string(plan.log.processing_us) + "\r\n";
  Log(std::move(plan.log), body);
  if (plan.status != 200) {
    std::string extra = processing;
    if (plan.retry_after >= 0) extra += "Retry-After: " + std::to_string(static_cast<int>(plan.retry_after)) + "\r\n";
    return WriteAll(fd, SimpleResponse(plan.status, plan.error_body, extra));
  }
  // Like vLLM (uvicorn) and SGLang: a stream's headers go out at once, before the queue and the
  // prefill; its first event comes after them. A whole answer waits for everything.
  if (plan.stream) {
    if (!WriteAll(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                      "Transfer-Encoding: chunked\r\n" + processing + "\r\n")) {
      return false;
    }
  }
  AcquireSlot();
  struct SlotGuard {
    Impl* impl;
    ~SlotGuard() { impl->ReleaseSlot(); }
  } guard{this};
  KvSequence seq(&kv_);  // the KV-memory model: admission (may queue), prefill, growth
  if (!seq.Admit(plan.prompt_tokens, plan.kv_output_tokens)) {
    if (seq.too_large) return WriteAll(fd, SimpleResponse(400, KvTooLargeBody(plan.prompt_tokens)));
    return false;
  }
  if (!seq.Prefill(plan.prefill_us)) return false;
  if (!plan.stream) {
    if (!Sleep(plan.delay_us[0])) return false;
    return WriteAll(fd, SimpleResponse(200, plan.payloads[0], processing));
  }
  // Events due at the same time are written together (one send), unless flush_each_event.
  std::string pending;
  auto flush = [&]() {
    if (pending.empty()) return true;
    bool ok = WriteAll(fd, pending);
    pending.clear();
    return ok;
  };
  auto write_chunk = [&](const std::string& data) {
    char size[32];
    std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
    pending += std::string(size) + data + "\r\n";
    return options_.flush_each_event ? flush() : true;
  };
  for (size_t i = 0; i < plan.payloads.size(); ++i) {
    if ((plan.fault && static_cast<int>(i) == plan.fault->after) || plan.delay_us[i] > 0) {
      if (!flush()) return false;
    }
    if (plan.fault && static_cast<int>(i) == plan.fault->after) {
      if (plan.fault->kind == "stall") {
        if (!Sleep(int64_t{plan.fault->delay_ms} * 1000)) return false;
      } else if (plan.fault->kind == "reset") {
        linger l{1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
        shutdown(fd, SHUT_RDWR);
        return false;
      } else if (plan.fault->kind == "malformed-sse") {
        if (!write_chunk("data: {\"id\": \"chatcmpl-sim\", \"choices\": [{\"delta\": {\"content\": \"x\"\n\n")) return false;
        if (!flush()) return false;
      }
    }
    if (!Sleep(plan.delay_us[i])) return false;
    if (!seq.Grow(plan.prompt_tokens + plan.kv_output_tokens * static_cast<int64_t>(i + 1) / static_cast<int64_t>(plan.payloads.size()), plan.prefill_us)) return false;
    if (!write_chunk("data: " + plan.payloads[i] + "\n\n")) return false;
  }
  pending += "0\r\n\r\n";
  return flush();
}

std::string SimServer::Impl::KvTooLargeBody(int64_t prompt_tokens) const {
  json error = {{"object", "error"},
                {"message", "prompt of " + std::to_string(prompt_tokens) + " tokens does not fit the KV cache of " +
                                std::to_string(options_.kv.capacity_tokens) + " tokens"},
                {"type", "BadRequestError"}, {"code", 400}};
  return error.dump();
}

}  // namespace strata::sim
