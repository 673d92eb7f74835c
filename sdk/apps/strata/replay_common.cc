#include "replay_common.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "commands.h"
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
  counting.counter = MakeRequestTokenCounter(*counting.chat_template, *counting.tokenizer);
  return counting;
}

std::string ValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool valid = len > 0 && i + len <= text.size();
    for (size_t k = 1; valid && k < len; ++k) valid = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    if (valid && len > 1) {
      // Overlong forms, surrogates and code points above U+10FFFF are not UTF-8 either.
      uint32_t cp = c & (0x7F >> len);
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
      static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
      valid = cp >= kMin[len] && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
    }
    if (valid) {
      out.append(text.data() + i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

std::string DumpJson(const nlohmann::ordered_json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
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

void FlushStdout() {
  std::cout.flush();
  const bool failed = !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout);
  if (failed) {
    std::cout.clear();
    throw CommandFailed{"writing to standard output failed (" + std::string(std::strerror(errno ? errno : EIO)) +
                        ")"};
  }
}

}  // namespace strata::cli
