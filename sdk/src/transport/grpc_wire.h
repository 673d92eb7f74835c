// The few protobuf messages of sglang.runtime.v1 (proto/sglang/runtime/v1/sglang.proto) that the
// gRPC transport sends and receives, encoded and decoded by hand, and gRPC's message framing.
//
// Why not the generated code: the transport then needs neither libprotobuf nor gRPC++ at run time.
// Debian's libsentencepiece (used by strata::tokenize) exports a bundled protobuf 3.14 runtime, which
// cannot share a process with libprotobuf 3.21 (startup crash or version abort), and every strata
// program links both components. gRPC itself is HTTP/2, which libcurl speaks.
#ifndef STRATA_SRC_TRANSPORT_GRPC_WIRE_H_
#define STRATA_SRC_TRANSPORT_GRPC_WIRE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/transport.h"

namespace strata::transport_internal {

// The hand-encoded gRPC client over libcurl HTTP/2 that strata::transport_grpc replaces; kept only
// until the benchmark (bench/bench_grpc_transport.cc) has measured both side by side.
struct CurlGrpcOptions {
  std::string target;  // host:port
  Timeouts timeouts;
  RetryPolicy retry;
  Clock* clock = nullptr;
};
StatusOr<std::unique_ptr<Transport>> MakeCurlGrpcTransport(CurlGrpcOptions options);

// OpenAIRequest{json_body = 1 (bytes), trace_headers = 2 (map<string,string>)}.
std::string EncodeOpenAIRequest(std::string_view json_body,
                                const std::vector<std::pair<std::string, std::string>>& trace_headers);
// AbortRequest{rid = 1, abort_all = 2}.
std::string EncodeAbortRequest(std::string_view rid, bool abort_all);

// OpenAIStreamChunk{json_chunk = 1 (bytes), finished = 2 (bool)}; false for malformed bytes.
bool DecodeOpenAIStreamChunk(std::string_view bytes, std::string* json_chunk, bool* finished);
// A message whose field 1 is a bool (HealthCheckResponse.healthy, AbortResponse.success).
bool DecodeBoolField1(std::string_view bytes, bool* value);

// gRPC length-prefixed message: 1 byte flag (0: uncompressed), 4 bytes big-endian length.
std::string FrameGrpcMessage(std::string_view message);

// Pulls complete messages out of a byte stream. Not thread-safe.
class GrpcFrameReader {
 public:
  void Append(std::string_view bytes) { buffer_.append(bytes.data(), bytes.size()); }
  // The next complete message into *message; false when none is complete yet. *compressed is set
  // when the message used a compression flag (not negotiated by strata: an error).
  bool Next(std::string* message, bool* compressed);
  size_t pending() const { return buffer_.size(); }

 private:
  std::string buffer_;
};

// Percent-decoding of the grpc-message header.
std::string DecodeGrpcMessage(std::string_view value);

}  // namespace strata::transport_internal

#endif  // STRATA_SRC_TRANSPORT_GRPC_WIRE_H_
