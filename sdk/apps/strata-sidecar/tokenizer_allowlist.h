// TokenizerAllowList: the tokenizers tenants of strata-sidecar may give their agents.
//
// Tenants never choose files of the server: the operator names tokenizers in the configuration
// ("tokenizers": {"glm-5.3": "hf:/srv/glm/tokenizer.json"}), and a tenant's AgentSpec.tokenizer or
// config_json "tokenizer" must be one of those names, or a spec that reads no file (estimate,
// estimate:3.5, estimate:FAMILY). The sidecar's default (--tokenizer) is a name of the list or any
// spec; when it reads a file and is not in the list, it is listed as "default". Whatever a tenant
// asks for, a refusal says the same thing (which names are allowed), never whether a file exists,
// is readable or what it holds.
//
// Thread safety: immutable after Make; every method may be called from any thread.
#ifndef STRATA_APPS_STRATA_SIDECAR_TOKENIZER_ALLOWLIST_H_
#define STRATA_APPS_STRATA_SIDECAR_TOKENIZER_ALLOWLIST_H_

#include <map>
#include <string>
#include <string_view>

#include "strata/status.h"

namespace strata::sidecar {

class TokenizerAllowList {
 public:
  // An empty list whose default is "estimate".
  TokenizerAllowList();
  // `named`: the operator's names and their specs; `default_tokenizer`: a name of `named` or a
  // spec. INVALID_ARGUMENT for a name that is not 1-64 characters of [A-Za-z0-9._-] (naming the
  // key "tokenizers.NAME"), or a file-reading default not in the list while "default" names
  // another spec.
  static StatusOr<TokenizerAllowList> Make(std::map<std::string, std::string> named,
                                           std::string default_tokenizer);

  // True for a spec that reads a file (hf:PATH, spm:PATH).
  static bool ReadsFile(std::string_view spec);

  // The spec of the default tokenizer (a name resolved).
  const std::string& default_spec() const { return default_spec_; }
  // The names and their specs, the default's included.
  const std::map<std::string, std::string>& named() const { return named_; }

  // The spec a tenant's `requested` tokenizer stands for: a name's spec, or `requested` itself
  // when it reads no file. INVALID_ARGUMENT otherwise, with one message whatever the file is:
  // `tokenizer "X" is not one of the allowed tokenizers: a, b (...)`.
  StatusOr<std::string> Resolve(std::string_view requested) const;
  // What a tenant is shown for an agent's stored `spec`: the name it was made from when the
  // spec reads a file of the list, else the spec.
  std::string Shown(std::string_view spec) const;

  // Makes each listed tokenizer and the default once (at startup), so that a missing or wrong file
  // is the operator's error, not every tenant's: the first failure, naming its key
  // ("tokenizers.NAME: ..." or "tokenizer (--tokenizer): ...").
  Status CheckAll() const;

 private:
  std::map<std::string, std::string> named_;
  std::string default_spec_ = "estimate";
  bool default_listed_ = false;  // the default is a name of the list (given, or added as default)
};

}  // namespace strata::sidecar

#endif  // STRATA_APPS_STRATA_SIDECAR_TOKENIZER_ALLOWLIST_H_
