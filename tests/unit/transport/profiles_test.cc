#include <catch2/catch.hpp>

#include <map>

#include "strata/client.h"

namespace strata {
namespace {

std::map<std::string, std::string> AsMap(const std::vector<std::pair<std::string, std::string>>& fields) {
  return std::map<std::string, std::string>(fields.begin(), fields.end());
}

TEST_CASE("kept reasoning asks vLLM and SGLang templates not to clear it", "[transport]") {
  RequestFields f;
  f.keep_reasoning = true;
  CHECK(AsMap(ProfileFields(Backend::kVllm, f))["chat_template_kwargs"] == R"({"clear_thinking":false})");
  f.thinking = true;
  CHECK(AsMap(ProfileFields(Backend::kVllm, f))["chat_template_kwargs"] ==
        R"({"enable_thinking":true,"clear_thinking":false})");
  CHECK(AsMap(ProfileFields(Backend::kSglang, f))["chat_template_kwargs"] ==
        R"({"enable_thinking":true,"clear_thinking":false})");
  CHECK(AsMap(ProfileFields(Backend::kOpenAI, f)).count("chat_template_kwargs") == 0);
  CHECK(AsMap(ProfileFields(Backend::kZai, f)).count("chat_template_kwargs") == 0);
  f.keep_reasoning = false;
  CHECK(AsMap(ProfileFields(Backend::kSglang, f))["chat_template_kwargs"] == R"({"enable_thinking":true})");
}

TEST_CASE("priority goes to vLLM only when set, Z.ai gets no stream_options", "[transport]") {
  RequestFields f;
  CHECK(AsMap(ProfileFields(Backend::kVllm, f)).count("priority") == 0);
  f.priority = 0;
  CHECK(AsMap(ProfileFields(Backend::kVllm, f))["priority"] == "0");
  auto zai = AsMap(ProfileFields(Backend::kZai, f));
  CHECK(zai["stream"] == "true");
  CHECK(zai.count("stream_options") == 0);
}

TEST_CASE("backend profiles select the fields each server expects", "[transport]") {
  RequestFields f;
  f.max_output_tokens = 512;
  f.cache_salt = "salt";
  f.request_id = "r1";
  f.thinking = true;
  f.reasoning_effort = "high";
  f.priority = 3;
  auto vllm = AsMap(ProfileFields(Backend::kVllm, f));
  CHECK(vllm["stream"] == "true");
  CHECK(vllm["stream_options"] == R"({"include_usage":true})");
  CHECK(vllm["max_completion_tokens"] == "512");
  CHECK(vllm["cache_salt"] == "\"salt\"");
  CHECK(vllm["request_id"] == "\"r1\"");
  CHECK(vllm["chat_template_kwargs"] == R"({"enable_thinking":true})");
  CHECK(vllm["reasoning_effort"] == "\"high\"");
  CHECK(vllm["priority"] == "3");
  auto sglang = AsMap(ProfileFields(Backend::kSglang, f));
  CHECK(sglang["rid"] == "\"r1\"");
  CHECK(sglang.count("request_id") == 0);
  CHECK(sglang["cache_salt"] == "\"salt\"");
  CHECK(sglang.count("priority") == 0);
  auto zai = AsMap(ProfileFields(Backend::kZai, f));
  CHECK(zai["max_tokens"] == "512");
  CHECK(zai.count("max_completion_tokens") == 0);
  CHECK(zai.count("cache_salt") == 0);
  CHECK(zai["thinking"] == R"({"type":"enabled","clear_thinking":false})");
  f.stream = false;
  auto plain = AsMap(ProfileFields(Backend::kOpenAI, f));
  CHECK(plain["stream"] == "false");
  CHECK(plain.count("stream_options") == 0);
  CHECK(plain.count("cache_salt") == 0);
}

TEST_CASE("backend names round-trip", "[transport]") {
  for (Backend b : {Backend::kOpenAI, Backend::kVllm, Backend::kSglang, Backend::kZai}) {
    CHECK(ParseBackend(BackendName(b)).value() == b);
  }
  CHECK(ParseBackend("tgi").status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("records serialize as one JSON line with null for unreported cached tokens", "[transport]") {
  RequestRecord r;
  r.agent_id = "a";
  r.code = StatusCode::kUnavailable;
  std::string json = RecordToJson(r);
  CHECK(json.find("\"cached_tokens_reported\":null") != std::string::npos);
  CHECK(json.find("\"code\":\"UNAVAILABLE\"") != std::string::npos);
  CHECK(json.find('\n') == std::string::npos);
}

}  // namespace
}  // namespace strata
