#include <catch2/catch.hpp>

#include <string>

#include "sglang/runtime/v1/sglang.pb.h"
#include "transport/grpc_wire.h"

namespace strata::transport_internal {
namespace {

namespace pb = ::sglang::runtime::v1;

TEST_CASE("hand-encoded OpenAIRequest and AbortRequest parse with protoc's generated code", "[transport][grpc]") {
  std::string body = R"({"model":"m","messages":[{"role":"user","content":"ü"}]})" + std::string(300, 'x');
  pb::OpenAIRequest request;
  REQUIRE(request.ParseFromString(EncodeOpenAIRequest(body, {{"traceparent", "00-abc"}, {"x-k", "v"}})));
  CHECK(request.json_body() == body);
  CHECK(request.trace_headers().size() == 2);
  CHECK(request.trace_headers().at("traceparent") == "00-abc");
  pb::AbortRequest abort;
  REQUIRE(abort.ParseFromString(EncodeAbortRequest("rid-7", true)));
  CHECK(abort.rid() == "rid-7");
  CHECK(abort.abort_all());
}

TEST_CASE("generated OpenAIStreamChunk and bool responses decode by hand", "[transport][grpc]") {
  pb::OpenAIStreamChunk chunk;
  chunk.set_json_chunk(std::string(1000, 'j'));
  chunk.set_finished(true);
  std::string json;
  bool finished = false;
  REQUIRE(DecodeOpenAIStreamChunk(chunk.SerializeAsString(), &json, &finished));
  CHECK(json == chunk.json_chunk());
  CHECK(finished);
  pb::HealthCheckResponse health;
  health.set_healthy(true);
  bool healthy = false;
  REQUIRE(DecodeBoolField1(health.SerializeAsString(), &healthy));
  CHECK(healthy);
  CHECK_FALSE(DecodeOpenAIStreamChunk(std::string("\x0a\x05" "ab", 4), &json, &finished));
}

TEST_CASE("gRPC framing splits messages arriving in pieces", "[transport][grpc]") {
  std::string stream = FrameGrpcMessage("hello") + FrameGrpcMessage("") + FrameGrpcMessage(std::string(70000, 'z'));
  GrpcFrameReader reader;
  std::vector<std::string> got;
  for (char c : stream) {
    reader.Append(std::string_view(&c, 1));
    std::string m;
    bool compressed;
    while (reader.Next(&m, &compressed)) got.push_back(m);
  }
  REQUIRE(got.size() == 3);
  CHECK(got[0] == "hello");
  CHECK(got[1].empty());
  CHECK(got[2].size() == 70000);
  CHECK(DecodeGrpcMessage("a%20b%3Ac") == "a b:c");
}

}  // namespace
}  // namespace strata::transport_internal
