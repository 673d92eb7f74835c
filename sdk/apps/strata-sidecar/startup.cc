#include "startup.h"

#include <sys/prctl.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "strata/chat_template.h"
#include "strata/client.h"
#include "tokenizer_allowlist.h"

namespace strata::sidecar {
namespace {

// The host of an http(s) URL ("" when there is none), brackets of an IPv6 address kept.
std::string UrlHost(std::string_view url) {
  size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return "";
  std::string_view rest = url.substr(scheme + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  size_t at = rest.rfind('@');
  if (at != std::string_view::npos) rest = rest.substr(at + 1);
  if (!rest.empty() && rest.front() == '[') {
    size_t close = rest.find(']');
    return close == std::string_view::npos ? "" : std::string(rest.substr(0, close + 1));
  }
  return std::string(rest.substr(0, rest.find(':')));
}

Status CheckUpstream(const std::string& upstream) {
  if (upstream.empty()) return Status::Ok();
  const bool http = upstream.rfind("http://", 0) == 0;
  const bool https = upstream.rfind("https://", 0) == 0;
  if ((!http && !https) || UrlHost(upstream).empty()) {
    std::string shown = upstream.substr(0, 80);
    for (char& c : shown) {
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    }
    return InvalidArgumentError("--upstream (upstream): \"" + shown +
                                "\" is not an http:// or https:// URL with a host (e.g. "
                                "http://127.0.0.1:8000/v1)");
  }
  return Status::Ok();
}

Status CheckApiKey(const SidecarConfig& config, const GetEnv& getenv) {
  const std::string& name = config.upstream_api_key_env;
  if (name.empty()) return Status::Ok();
  const std::string where = "--upstream-api-key-env (upstream_api_key_env): ";
  const char* value = getenv ? getenv(name.c_str()) : std::getenv(name.c_str());
  if (value == nullptr || *value == '\0') {
    return InvalidArgumentError(where + "the environment variable " + name + " is " +
                                (value == nullptr ? "not set" : "empty") +
                                ": export the upstream key in it, or leave the flag out");
  }
  for (const char* c = value; *c != '\0'; ++c) {
    if (static_cast<unsigned char>(*c) < 0x20 || *c == 0x7f) {
      return InvalidArgumentError(where + "the key in " + name +
                                  " holds a control character (a CR or LF, e.g. from a file's "
                                  "line end): it would end the Authorization header; strip it");
    }
  }
  const std::string host = UrlHost(config.upstream);
  if (config.upstream.rfind("http://", 0) == 0 && !IsLoopbackHost(host)) {
    return InvalidArgumentError(where + "the key would be sent in plain text to " + host +
                                " (--upstream is http:// and not a loopback address): use an "
                                "https:// upstream, or a loopback one");
  }
  return Status::Ok();
}

}  // namespace

Status CheckServingSettings(const SidecarConfig& config, const GetEnv& getenv) {
  StatusOr<Backend> backend = ParseBackend(config.backend);
  if (!backend.ok()) {
    return InvalidArgumentError("--backend (backend): " + backend.status().message());
  }
  if (!config.chat_template.empty()) {  // "": no template (content + overhead per message)
    StatusOr<std::unique_ptr<ChatTemplate>> chat_template = MakeChatTemplate(config.chat_template);
    if (!chat_template.ok()) {
      return InvalidArgumentError("--template (template): " + chat_template.status().message());
    }
  }
  StatusOr<TokenizerAllowList> tokenizers =
      TokenizerAllowList::Make(config.tokenizers, config.tokenizer);
  if (!tokenizers.ok()) return tokenizers.status();
  STRATA_RETURN_IF_ERROR(tokenizers->CheckAll());
  STRATA_RETURN_IF_ERROR(CheckUpstream(config.upstream));
  return CheckApiKey(config, getenv);
}

Status DisableCoreDumps() {
  struct rlimit none = {0, 0};
  if (::setrlimit(RLIMIT_CORE, &none) != 0) {
    return InternalError(std::string("cannot disable core dumps (setrlimit RLIMIT_CORE): ") +
                         std::strerror(errno));
  }
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    return InternalError(std::string("cannot disable core dumps (prctl PR_SET_DUMPABLE): ") +
                         std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace strata::sidecar
