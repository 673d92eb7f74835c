#include "replay_common.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "commands.h"
#include "core/utf8.h"
#include "strata/tokenizer_spec.h"

namespace strata::cli {

HygieneOptions ReplayHygiene(size_t max_segment_tokens, bool no_hygiene) {
  HygieneOptions hygiene;
  hygiene.max_segment_tokens = max_segment_tokens;
  if (no_hygiene) {
    hygiene.max_segment_tokens = 0;
    hygiene.deduplicate = false;
    hygiene.fold_error_logs = false;
  }
  return hygiene;
}

std::unique_ptr<Tokenizer> MakeTokenizerOrThrow(const std::string& spec, const std::string& option) {
  StatusOr<std::unique_ptr<Tokenizer>> made = MakeTokenizer(spec);
  if (!made.ok()) {
    // A spec of no known form (or an estimator ratio out of range) is a usage error; a file that
    // cannot be read or is refused is a failure.
    const bool names_file = spec.rfind("hf:", 0) == 0 || spec.rfind("spm:", 0) == 0;
    if (made.status().code() == StatusCode::kInvalidArgument && !names_file) {
      throw CLI::ValidationError(option, made.status().message());
    }
    throw CommandFailed{made.status().ToString()};
  }
  return std::move(made).value();
}

ExactCounting MakeExactCounting(const std::string& spec) {
  ExactCounting counting;
  counting.tokenizer = MakeTokenizerOrThrow(spec, "--tokenizer");
  counting.chat_template = MakeGlm5ChatTemplate();
  counting.prompt_tokens = std::make_unique<agent_internal::PromptTokens>(
      counting.tokenizer.get(), std::vector<std::string>());
  counting.counter = std::make_unique<agent_internal::IncrementalRequestCounter>(
      counting.chat_template.get(), counting.tokenizer.get(), counting.prompt_tokens.get());
  return counting;
}

std::string ValidUtf8(std::string_view text) { return internal::ToValidUtf8(text); }

std::string DumpJson(const nlohmann::ordered_json& value, int indent) {
  return internal::DumpOutsideJson(value, indent);
}

OutputFile::OutputFile(std::string path, std::string option) : path_(std::move(path)), option_(std::move(option)) {
  struct stat st;
  const bool special = ::stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
  if (!special) temp_path_ = path_ + ".tmp-" + std::to_string(::getpid());
  out_.open(special ? path_ : temp_path_, std::ios::binary | std::ios::trunc);
  if (!out_) {
    const int error = errno;
    throw CommandFailed{"cannot write " + option_ + " file \"" + path_ + "\"" +
                        (temp_path_.empty() ? "" : " (temporary file \"" + temp_path_ + "\")") + ": " +
                        std::strerror(error)};
  }
}

OutputFile::~OutputFile() {
  if (done_) return;
  out_.close();
  if (!temp_path_.empty()) std::remove(temp_path_.c_str());
}

void OutputFile::Commit() {
  done_ = true;
  out_.flush();
  const bool written = static_cast<bool>(out_);
  const int error = errno;
  out_.close();
  if (!written || !out_) {
    if (!temp_path_.empty()) std::remove(temp_path_.c_str());
    throw CommandFailed{"writing " + option_ + " file \"" + path_ + "\" failed (" +
                        std::strerror(error != 0 ? error : EIO) + "); " +
                        (temp_path_.empty() ? "it may be incomplete" : "the file was not changed")};
  }
  if (!temp_path_.empty() && std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int rename_error = errno;
    std::remove(temp_path_.c_str());
    throw CommandFailed{"renaming the " + option_ + " file into place as \"" + path_ + "\" failed: " +
                        std::strerror(rename_error)};
  }
}

}  // namespace strata::cli
