// The objects AgentServices injects, made ready for an agent (agent_services.h).
#include "agent/agent_services.h"

#include <utility>

#include "core/text_util.h"
#include "strata/tokenizer_spec.h"
#include "tokenize/exact_tokenizer.h"

namespace strata::agent_internal {
namespace {

class BorrowedPolicy final : public CompactionPolicy {
 public:
  explicit BorrowedPolicy(CompactionPolicy* policy) : policy_(policy) {}
  std::string Name() const override { return policy_->Name(); }
  bool ShouldCompact(const CompactionInput& input) const override {
    return policy_->ShouldCompact(input);
  }
  StatusOr<HistoryEdit> Plan(const CompactionInput& input) override { return policy_->Plan(input); }

 private:
  CompactionPolicy* policy_;
};

// The name MakeTokenizer gives the tokenizer of file `path`: `prefix` and the file's SHA-256.
StatusOr<std::string> FileTokenizerName(const char* prefix, std::string_view path) {
  STRATA_ASSIGN_OR_RETURN(std::string bytes, tokenize_internal::ReadFile(std::string(path)));
  return prefix + internal::Sha256Hex(bytes);
}

}  // namespace

std::unique_ptr<CompactionPolicy> BorrowPolicy(CompactionPolicy* policy) {
  return std::make_unique<BorrowedPolicy>(policy);
}

StatusOr<std::string> TokenizerNameOf(std::string_view spec) {
  if (spec.rfind("hf:", 0) == 0 && spec.size() > 3)
    return FileTokenizerName("hf-bpe:", spec.substr(3));
  if (spec.rfind("spm:", 0) == 0 && spec.size() > 4)
    return FileTokenizerName("spm:", spec.substr(4));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> made, MakeTokenizer(spec));
  return made->Name();
}

Status CheckSharedTokenizer(const Tokenizer& shared, const std::string& spec) {
  StatusOr<std::string> expected = TokenizerNameOf(spec);
  if (!expected.ok()) {
    return Status(expected.status().code(), "tokenizer \"" + spec +
                                                "\" (checked against AgentServices::tokenizer): " +
                                                expected.status().message());
  }
  if (shared.Name() == *expected) return Status::Ok();
  return FailedPreconditionError(
      "AgentServices::tokenizer is " + shared.Name() + ", but the configured tokenizer \"" + spec +
      "\" is " + *expected + ": inject the tokenizer MakeTokenizer(\"" + spec +
      "\") makes, or set AgentConfig::tokenizer to the spec the injected one was made from");
}

}  // namespace strata::agent_internal
