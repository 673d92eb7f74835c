// SentencePiece backend. This is the only strata file that includes sentencepiece_processor.h: the
// 0.1.97 header declares `namespace absl { using std::string_view; }`, which breaks any translation
// unit that also sees real absl (gRPC). Keep it that way: no gRPC/absl includes here, and no
// sentencepiece types outside this file (pimpl).
#include <sentencepiece_processor.h>

#include "tokenize/exact_tokenizer.h"

namespace strata::tokenize_internal {
namespace {

class SentencePieceTokenizer final : public ExactTokenizer {
 public:
  SentencePieceTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> processor, std::string name)
      : processor_(std::move(processor)), name_(std::move(name)) {}

  std::string Name() const override { return "spm:" + name_; }

  std::vector<int32_t> Encode(std::string_view text) const override {
    std::vector<int> ids;
    // Encode is const and thread-safe in SentencePieceProcessor; it fails only without a model.
    if (!processor_->Encode(std::string(text), &ids).ok()) return {};
    return std::vector<int32_t>(ids.begin(), ids.end());
  }

  size_t Count(std::string_view text) const override { return Encode(text).size(); }

  StatusOr<std::string> Decode(const std::vector<int32_t>& ids) const override {
    int size = processor_->GetPieceSize();
    for (int32_t id : ids)
      if (id < 0 || id >= size)
        return OutOfRangeError("token id " + std::to_string(id) + " is not in the vocabulary of " + Name() +
                               " (ids 0.." + std::to_string(size - 1) + ")");
    std::string out;
    auto status = processor_->Decode(std::vector<int>(ids.begin(), ids.end()), &out);
    if (!status.ok()) return InternalError("sentencepiece decode failed: " + status.ToString());
    return out;
  }

  StatusOr<int32_t> TokenId(std::string_view token) const override {
    int id = processor_->PieceToId(std::string(token));
    if (id == processor_->unk_id() && token != processor_->IdToPiece(id))
      return NotFoundError("no piece \"" + std::string(token) + "\" in " + Name());
    return id;
  }

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::string name_;
};

}  // namespace

StatusOr<std::unique_ptr<ExactTokenizer>> MakeSentencePiece(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
  auto status = processor->LoadFromSerializedProto(bytes);
  if (!status.ok())
    return DataLossError("\"" + path + "\" is not a SentencePiece model: " + status.ToString() +
                         " (for Hugging Face tokenizer.json files use --tokenizer hf:PATH)");
  return std::unique_ptr<ExactTokenizer>(
      std::make_unique<SentencePieceTokenizer>(std::move(processor), Sha256Hex(bytes)));
}

}  // namespace strata::tokenize_internal
