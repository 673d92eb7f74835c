#include "tokenizer_allowlist.h"

#include <memory>
#include <utility>

#include "strata/tokenizer_spec.h"

namespace strata::sidecar {
namespace {

constexpr char kDefaultName[] = "default";

bool IsValidTokenizerName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

// At most 80 bytes of a tenant's value, control and non-ASCII bytes as '?': safe to quote.
std::string Quoted(std::string_view value) {
  std::string shown(value.substr(0, 80));
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  if (value.size() > 80) shown += "...";
  return "\"" + shown + "\"";
}

}  // namespace

TokenizerAllowList::TokenizerAllowList() = default;

bool TokenizerAllowList::ReadsFile(std::string_view spec) {
  return spec.rfind("hf:", 0) == 0 || spec.rfind("spm:", 0) == 0;
}

StatusOr<TokenizerAllowList> TokenizerAllowList::Make(std::map<std::string, std::string> named,
                                                      std::string default_tokenizer) {
  TokenizerAllowList list;
  for (const auto& [name, spec] : named) {
    if (!IsValidTokenizerName(name)) {
      return InvalidArgumentError(
          "tokenizers." + name + ": " + Quoted(name) +
          " is not a tokenizer name (1-64 characters of A-Z a-z 0-9 . _ -)");
    }
    if (spec.empty()) return InvalidArgumentError("tokenizers." + name + ": the spec is empty");
  }
  list.named_ = std::move(named);
  auto it = list.named_.find(default_tokenizer);
  if (it != list.named_.end()) {
    list.default_spec_ = it->second;
    list.default_listed_ = true;
    return list;
  }
  list.default_spec_ = std::move(default_tokenizer);
  if (ReadsFile(list.default_spec_)) {
    auto [slot, inserted] = list.named_.emplace(kDefaultName, list.default_spec_);
    if (!inserted && slot->second != list.default_spec_) {
      return InvalidArgumentError(
          "tokenizer (--tokenizer) reads a file that tokenizers does not list, and "
          "tokenizers.default is another tokenizer: give --tokenizer as one of the names of "
          "tokenizers");
    }
    list.default_listed_ = true;
  }
  return list;
}

StatusOr<std::string> TokenizerAllowList::Resolve(std::string_view requested) const {
  auto it = named_.find(std::string(requested));
  if (it != named_.end()) return it->second;
  if (!requested.empty() && !ReadsFile(requested)) return std::string(requested);
  std::string names;
  for (const auto& [name, spec] : named_) names += (names.empty() ? "" : ", ") + name;
  return InvalidArgumentError("tokenizer " + Quoted(requested) +
                              " is not one of the allowed tokenizers: " +
                              (names.empty() ? std::string("(none configured)") : names) +
                              " (or a spec that reads no file: estimate, "
                              "estimate:BYTES_PER_TOKEN, estimate:FAMILY)");
}

std::string TokenizerAllowList::Shown(std::string_view spec) const {
  if (!ReadsFile(spec)) return std::string(spec);
  for (const auto& [name, listed] : named_) {
    if (listed == spec) return name;
  }
  return std::string(spec);
}

Status TokenizerAllowList::CheckAll() const {
  for (const auto& [name, spec] : named_) {
    StatusOr<std::unique_ptr<Tokenizer>> made = MakeTokenizer(spec);
    if (!made.ok()) {
      const bool is_default = name == kDefaultName && spec == default_spec_;
      return Status(made.status().code(),
                    (is_default ? std::string("tokenizer (--tokenizer)") : "tokenizers." + name) +
                        ": " + made.status().message());
    }
  }
  if (!default_listed_) {
    StatusOr<std::unique_ptr<Tokenizer>> made = MakeTokenizer(default_spec_);
    if (!made.ok()) {
      return Status(made.status().code(), "tokenizer (--tokenizer): " + made.status().message());
    }
  }
  return Status::Ok();
}

}  // namespace strata::sidecar
