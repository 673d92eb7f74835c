// strata-sidecar's HTTP listener on cpp-httplib (http_server.h).
#include "http_server.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <exception>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "http_connection.h"

namespace strata::sidecar {
namespace {

void Apply(const HttpReply& reply, httplib::Response& res) {
  res.status = reply.status;
  for (const auto& [name, value] : reply.headers) res.set_header(name, value);
  if (!reply.stream) {
    res.set_content(reply.body, reply.content_type.c_str());
    return;
  }
  auto stream = reply.stream;
  res.set_chunked_content_provider(reply.content_type, [stream](size_t, httplib::DataSink& sink) {
    stream([&sink](std::string_view data) {
      return sink.is_writable() && sink.write(data.data(), data.size());
    });
    sink.done();
    return true;
  });
}

void SetError(httplib::Response& res, const Status& status) { Apply(ErrorReply(status), res); }

Status CheckReadable(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) {
    return UnavailableError("tls." + what + " \"" + path +
                            "\" cannot be read: check the path and its permissions");
  }
  return Status::Ok();
}

}  // namespace

class HttpServer::Impl {
 public:
  HttpServerOptions options_;
  std::string host_;
  int port_ = 0;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<bool> draining_{false};
  std::mutex stop_mu_;
  bool stopped_ = false;
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  bool done_ = false;  // guarded by done_mu_: the listener and its requests have finished

  // The caller's tenant, or an error reply already set on `res`.
  const TenantConfig* Authenticate(const httplib::Request& req, httplib::Response& res) {
    StatusOr<const TenantConfig*> tenant =
        options_.authenticator->Authenticate(req.get_header_value("Authorization"));
    if (!tenant.ok()) {
      SetError(res, tenant.status());
      return nullptr;
    }
    return *tenant;
  }

  httplib::Server::HandlerWithResponse ErrorHandler() {
    // Statuses httplib sets itself (404 no route, 413 body above the limit, 400 bad request) get
    // OpenAI's error shape; replies the routes made are left as they are.
    return httplib::Server::HandlerWithResponse([this](const httplib::Request& req,
                                                       httplib::Response& res) {
      if (!res.body.empty() || res.content_provider_) {
        return httplib::Server::HandlerResponse::Unhandled;
      }
      Status status = InternalError("request failed with HTTP " + std::to_string(res.status));
      if (res.status == 404) {
        status = NotFoundError(
            "no route for " + req.method + " " + req.path +
            " (POST /v1/chat/completions, GET /v1/models, "
            "/v1/strata/agents/{id}/recall/{recall_id}, /metrics, /healthz, /readyz)");
      } else if (res.status == 413 &&
                 req.get_header_value("Content-Type") == "application/x-www-form-urlencoded") {
        // cpp-httplib parses form bodies and refuses those above 8,192 bytes (curl -d sends this
        // type unless told otherwise).
        status = InvalidArgumentError(
            "the body was sent as application/x-www-form-urlencoded, which is limited to 8192 "
            "bytes: send it with Content-Type: application/json");
      } else if (res.status == 413) {
        status = InvalidArgumentError("the request body is above the sidecar's limit of " +
                                      std::to_string(options_.authenticator->MaxRequestBytes()) +
                                      " bytes (the largest tenant max_request_bytes)");
      } else if (res.status == 400) {
        status = InvalidArgumentError("malformed HTTP request");
      }
      const int code = res.status;
      HttpReply reply = ErrorReply(status);
      if (code == 414) {
        reply.body = OpenAiErrorJson("the request URL is too long: use a shorter one",
                                     "invalid_request_error", "uri_too_long");
      }
      res.set_content(reply.body, reply.content_type.c_str());
      res.status = code;
      return httplib::Server::HandlerResponse::Handled;
    });
  }

  // Reads a request's body into `body`, sized once from its Content-Length (which the connection
  // checked against the sidecar's limit before any byte of the body was read): httplib's own
  // reading grows the body piece by piece, copying it again each time it outgrows its memory and
  // faulting in fresh pages at each size. False when the body cannot be read: `res` then has the status
  // httplib set (413 above the limit, 400 malformed), which ErrorHandler() words. A form-encoded
  // body is held to httplib's limit for those, as when httplib reads it.
  bool ReadBody(const httplib::Request& req, httplib::Response& res,
                const httplib::ContentReader& read, std::string* body) const {
    const std::string length = req.get_header_value("Content-Length");
    size_t declared = 0;
    if (std::from_chars(length.data(), length.data() + length.size(), declared).ec == std::errc())
      body->reserve(std::min<size_t>(declared, static_cast<size_t>(std::max<int64_t>(
                                                   1, options_.authenticator->MaxRequestBytes()))));
    if (!read([body](const char* data, size_t size) {
          body->append(data, size);
          return true;
        })) {
      if (res.status == -1) res.status = 400;
      return false;
    }
    if (body->size() > CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH &&
        req.get_header_value("Content-Type") == "application/x-www-form-urlencoded") {
      res.status = 413;
      return false;
    }
    return true;
  }

  void Routes() {
    httplib::Server& s = *server_;
    s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok\n", "text/plain");
    });
    s.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
      if (draining_.load()) {
        res.status = 503;
        res.set_content("draining\n", "text/plain");
      } else if (options_.ready && !options_.ready()) {
        res.status = 503;
        res.set_content("not ready\n", "text/plain");
      } else {
        res.set_content("ready\n", "text/plain");
      }
    });
    s.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
      // Every tenant's series: only the metrics tokens (tenants.h AuthorizeMetrics).
      if (Status allowed =
              options_.authenticator->AuthorizeMetrics(req.get_header_value("Authorization"));
          !allowed.ok()) {
        SetError(res, allowed);
        return;
      }
      if (!options_.metrics) {
        SetError(res, NotFoundError("this sidecar serves no metrics"));
        return;
      }
      res.set_content(options_.metrics(), "text/plain; version=0.0.4; charset=utf-8");
    });
    s.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
      if (Authenticate(req, res) == nullptr) return;
      Apply(options_.proxy->Models(), res);
    });
    s.Get(R"(/v1/strata/agents/([^/]+)/recall/([^/]+))",
          [this](const httplib::Request& req, httplib::Response& res) {
            const TenantConfig* tenant = Authenticate(req, res);
            if (tenant == nullptr) return;
            Apply(options_.proxy->Recall(*tenant, req.matches[1].str(), req.matches[2].str(),
                                         req.get_param_value("offset"),
                                         req.get_param_value("max_tokens")),
                  res);
          });
    s.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res,
                                          const httplib::ContentReader& read) {
      std::string body;
      if (!ReadBody(req, res, read, &body)) return;
      const TenantConfig* tenant = Authenticate(req, res);
      if (tenant == nullptr) return;
      if (static_cast<int64_t>(body.size()) > tenant->limits.max_request_bytes) {
        HttpReply reply = ErrorReply(InvalidArgumentError(
            "the request body has " + std::to_string(body.size()) + " bytes, above tenant \"" +
            tenant->name + "\"'s max_request_bytes (" +
            std::to_string(tenant->limits.max_request_bytes) + ")"));
        reply.status = 413;
        Apply(reply, res);
        return;
      }
      if (draining_.load()) {
        SetError(res, UnavailableError(
                          "the sidecar is draining (shutting down): retry on another instance"));
        return;
      }
      Apply(options_.proxy->ChatCompletions(*tenant, req.get_header_value("X-Strata-Agent"), body,
                                            CurrentClientWatch()),
            res);
    });
    for (const HttpGetRoute& route : options_.get_routes) {
      auto handle = route.handle;
      s.Get(route.prefix + "(/.*)?", [handle](const httplib::Request& req, httplib::Response& res) {
        HttpGetRequest get{req.path,
                           {req.params.begin(), req.params.end()},
                           req.get_header_value("Authorization")};
        Apply(handle(get), res);
      });
    }
    s.set_error_handler(ErrorHandler());
    s.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
          std::string what = "unknown exception";
          try {
            std::rethrow_exception(ep);
          } catch (const std::exception& e) {
            what = e.what();
          } catch (...) {
          }
          SetError(res, InternalError("the sidecar failed on this request: " + what));
        });
  }
};

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options) {
  if (options.authenticator == nullptr || options.proxy == nullptr) {
    return InvalidArgumentError("HttpServer needs an authenticator and a proxy");
  }
  STRATA_ASSIGN_OR_RETURN(HostPort address, ParseHostPort(options.listen, "--http-listen"));
  auto impl = std::make_unique<Impl>();
  if (options.tls.enabled()) {
    STRATA_RETURN_IF_ERROR(CheckReadable(options.tls.cert_file, "cert_file"));
    STRATA_RETURN_IF_ERROR(CheckReadable(options.tls.key_file, "key_file"));
    if (!options.tls.client_ca_file.empty()) {
      STRATA_RETURN_IF_ERROR(CheckReadable(options.tls.client_ca_file, "client_ca_file"));
    }
  }
  ConnectionLimits limits;
  limits.head_timeout = options.head_timeout;
  limits.max_per_client = options.max_connections_per_client;
  limits.max_body_bytes = std::max<int64_t>(1, options.authenticator->MaxRequestBytes());
  limits.keep_alive_timeout = std::chrono::seconds(2);
  limits.io_timeout = std::chrono::seconds(30);
  STRATA_ASSIGN_OR_RETURN(impl->server_, MakeGuardedServer(options.tls, limits));
  const int threads = std::max(2, options.threads);
  impl->server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  impl->server_->set_payload_max_length(
      static_cast<size_t>(std::max<int64_t>(1, options.authenticator->MaxRequestBytes())));
  impl->server_->set_keep_alive_max_count(1000);
  impl->options_ = std::move(options);
  impl->host_ = address.host;
  impl->Routes();
  int port = address.port;
  if (port == 0) {
    port = impl->server_->bind_to_any_port(address.host);
  } else if (!impl->server_->bind_to_port(address.host, port)) {
    port = -1;
  }
  if (port <= 0) {
    return UnavailableError("cannot listen on " + impl->options_.listen +
                            " (address in use, or not an address of this host)");
  }
  impl->port_ = port;
  WidenListenBacklog(*impl->server_);
  Impl* raw = impl.get();
  impl->thread_ = std::thread([raw] {
    raw->server_->listen_after_bind();  // returns after stop(), once the requests are answered
    std::lock_guard<std::mutex> lock(raw->done_mu_);
    raw->done_ = true;
    raw->done_cv_.notify_all();
  });
  // cpp-httplib's stop() does nothing until the listener's loop has begun (is_running): a Stop
  // that came first would leave the thread accepting forever, and its join would never return.
  // So Start returns once the loop runs (or has already ended).
  for (;;) {
    if (impl->server_->is_running()) break;
    std::unique_lock<std::mutex> done(impl->done_mu_);
    if (impl->done_cv_.wait_for(done, std::chrono::microseconds(200), [raw] { return raw->done_; })) {
      break;
    }
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() { Stop(); }

const std::string& HttpServer::host() const { return impl_->host_; }
int HttpServer::port() const { return impl_->port_; }
void HttpServer::BeginDrain() { impl_->draining_.store(true); }
bool HttpServer::draining() const { return impl_->draining_.load(); }
bool HttpServer::WaitIdle(std::chrono::steady_clock::time_point deadline) {
  return impl_->options_.proxy->WaitIdle(deadline);
}
void HttpServer::CancelAll() { impl_->options_.proxy->CancelAll(); }

void HttpServer::Stop(std::chrono::milliseconds drain_timeout) {
  std::lock_guard<std::mutex> lock(impl_->stop_mu_);
  if (impl_->stopped_) return;
  impl_->stopped_ = true;
  impl_->draining_.store(true);
  impl_->server_->stop();
  if (drain_timeout.count() > 0) {
    std::unique_lock<std::mutex> done(impl_->done_mu_);
    if (!impl_->done_cv_.wait_for(done, drain_timeout, [this] { return impl_->done_; })) {
      impl_->options_.proxy->CancelAll();
    }
  }
  if (impl_->thread_.joinable()) impl_->thread_.join();
}

}  // namespace strata::sidecar
