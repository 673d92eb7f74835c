// strata/grpc_transport.h — the Transport to SGLang's native gRPC service (strata::transport_grpc).
//
// A client of `sglang.runtime.v1.SglangService` (proto/sglang/runtime/v1/sglang.proto) on gRPC++:
// ChatComplete carries the same Chat Completions JSON body as HTTP and streams the answer back as
// JSON chunks, which go through the same parser as the HTTP transport, so a body gives the same
// Response over either. Link `strata::transport_grpc` (it brings gRPC++ and libprotobuf); programs
// that only speak HTTP link `strata::transport` alone.
//
//   strata::GrpcTransportOptions options;
//   options.target = "127.0.0.1:30001";   // SGLang started with --grpc-port 30001
//   std::unique_ptr<strata::Transport> transport = strata::MakeGrpcTransport(options).value();
//   strata::Response response;
//   strata::Status status = transport->Send(request.body, strata::CallOptions(), &response);
//
// One gRPC channel (one HTTP/2 connection, kept alive with pings) serves every call of a transport.
// Each call carries its deadline (grpc-timeout), so the server stops generating when the client
// gives up; CallOptions::cancel cancels the call (ClientContext::TryCancel) within ~50 ms.
// Timeouts: `first_byte` (scaled with the prompt size, see Timeouts::prefill_per_100k_tokens) runs
// until the first streamed message, `idle` between messages, `total` per attempt.
//
// Errors: the call's gRPC status code becomes the Status code unchanged (gRPC and strata codes have
// the same numbers and names), the message quoting the server's. An error JSON inside a chunk with
// status OK (SGLang's way of reporting e.g. a prompt over the context length) is mapped like the
// same body over HTTP. UNAVAILABLE and RESOURCE_EXHAUSTED are retried (RetryPolicy) while no
// message of the answer has arrived; nothing is retried after.
//
// Thread safety: the Transport is thread-safe; concurrent Send() calls share the channel.
#ifndef STRATA_GRPC_TRANSPORT_H_
#define STRATA_GRPC_TRANSPORT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strata/clock.h"
#include "strata/status.h"
#include "strata/transport.h"

namespace strata {

// What a gRPC transport is created with (MakeGrpcTransport).
struct GrpcTransportOptions {
  // "host:port" of an SGLang gRPC server (or strata-sim --grpc-port), without a scheme. Required.
  std::string target;
  Timeouts timeouts;  // connect, first message, idle between messages and total per attempt
  RetryPolicy retry;  // retried on UNAVAILABLE / RESOURCE_EXHAUSTED before the first message
  // Backoff sleeps, the deadline accounting of retries and the jitter seed (strata/clock.h). Not
  // owned; default nullptr: SystemClock().
  Clock* clock = nullptr;

  // TLS. Off by default (SGLang's gRPC listener is plaintext; TLS is for a proxy in front of it).
  bool use_tls = false;
  // PEM of the CA certificates that verify the server; "" uses gRPC's default roots.
  std::string tls_root_certs_pem;
  // Client certificate chain and private key (PEM) for mutual TLS; both or neither.
  std::string tls_client_cert_pem;
  std::string tls_client_key_pem;  // the key of tls_client_cert_pem
  // The name the server certificate must carry when it differs from the target's host (e.g. the
  // target is an IP address). "" checks the target's host.
  std::string tls_server_name;

  // Call credentials: sent as "authorization: Bearer <token>" metadata on every call when
  // non-empty. Needs use_tls unless allow_token_without_tls (a token in plaintext can be read by
  // anyone on the path). Never logged. (SGLang's own gRPC listener checks no token; a proxy does.)
  std::string bearer_token;
  bool allow_token_without_tls = false;  // see bearer_token. Default false
  // Extra metadata on every call (lower-case keys, printable ASCII values), e.g. a routing key.
  std::vector<std::pair<std::string, std::string>> metadata;

  // HTTP/2 keepalive pings on the channel: one after `keepalive_time` without activity, the
  // connection is dropped when no answer comes within `keepalive_timeout`. 0 disables them.
  // Defaults 30 s and 10 s (pings also while no call is active).
  std::chrono::milliseconds keepalive_time{30000};
  std::chrono::milliseconds keepalive_timeout{10000};  // see keepalive_time. Default 10 s

  // Largest request message sent / answer message accepted, in bytes. A request over the send
  // limit fails with RESOURCE_EXHAUSTED before anything is sent. Defaults 256 MiB and 64 MiB.
  // SGLang's server accepts requests of at most 4 MiB unless configured otherwise (see
  // docs/endpoints.md); a larger one fails with OUT_OF_RANGE from the server.
  int64_t max_send_message_bytes = int64_t{256} << 20;
  int64_t max_receive_message_bytes = int64_t{64} << 20;  // see above. Default 64 MiB
};

// A Transport over one gRPC++ channel to `options.target`. INVALID_ARGUMENT (nothing created) for
// an empty target or one with a scheme, a client key without a certificate (or the reverse), a
// bearer token without TLS (unless allowed), invalid metadata or non-positive message limits.
StatusOr<std::unique_ptr<Transport>> MakeGrpcTransport(GrpcTransportOptions options);

}  // namespace strata

#endif  // STRATA_GRPC_TRANSPORT_H_
