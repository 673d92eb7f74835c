// Backend profiles: which top-level fields vLLM, SGLang and Z.ai expect (docs/endpoints.md).
#include <nlohmann/json.hpp>

#include "strata/client.h"

namespace strata {

std::string_view BackendName(Backend backend) {
  switch (backend) {
    case Backend::kOpenAI: return "openai";
    case Backend::kVllm: return "vllm";
    case Backend::kSglang: return "sglang";
    case Backend::kZai: return "zai";
  }
  return "unknown";
}

StatusOr<Backend> ParseBackend(std::string_view name) {
  for (Backend b : {Backend::kOpenAI, Backend::kVllm, Backend::kSglang, Backend::kZai}) {
    if (BackendName(b) == name) return b;
  }
  return InvalidArgumentError("unknown backend \"" + std::string(name) + "\" (known: openai, vllm, sglang, zai)");
}

std::vector<std::pair<std::string, std::string>> ProfileFields(Backend backend, const RequestFields& f) {
  auto quote = [](const std::string& s) { return nlohmann::json(s).dump(); };
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("stream", f.stream ? "true" : "false");
  // Z.ai streams usage in its last chunk without being asked and documents no stream_options.
  if (f.stream && backend != Backend::kZai) out.emplace_back("stream_options", R"({"include_usage":true})");
  if (f.max_output_tokens > 0) {
    out.emplace_back(backend == Backend::kZai ? "max_tokens" : "max_completion_tokens",
                     std::to_string(f.max_output_tokens));
  }
  if (!f.cache_salt.empty() && (backend == Backend::kVllm || backend == Backend::kSglang)) {
    out.emplace_back("cache_salt", quote(f.cache_salt));
  }
  if (!f.request_id.empty()) {
    if (backend == Backend::kSglang) out.emplace_back("rid", quote(f.request_id));
    if (backend == Backend::kVllm || backend == Backend::kZai) out.emplace_back("request_id", quote(f.request_id));
  }
  if (f.thinking.has_value() && backend == Backend::kZai) {
    // clear_thinking:false keeps past reasoning in the prompt, which keeps the prefix stable.
    out.emplace_back("thinking", std::string(R"({"type":")") + (*f.thinking ? "enabled" : "disabled") +
                                     R"(","clear_thinking":false})");
  }
  if ((f.thinking.has_value() || f.keep_reasoning) && (backend == Backend::kVllm || backend == Backend::kSglang)) {
    // GLM templates served by vLLM/SGLang clear past reasoning at each user turn unless told not to.
    std::string kwargs = "{";
    if (f.thinking.has_value()) kwargs += std::string(R"("enable_thinking":)") + (*f.thinking ? "true" : "false");
    if (f.keep_reasoning) kwargs += std::string(kwargs.size() > 1 ? "," : "") + R"("clear_thinking":false)";
    out.emplace_back("chat_template_kwargs", kwargs + "}");
  }
  if (!f.reasoning_effort.empty()) out.emplace_back("reasoning_effort", quote(f.reasoning_effort));
  if (f.priority.has_value() && backend == Backend::kVllm) out.emplace_back("priority", std::to_string(*f.priority));
  return out;
}

}  // namespace strata
