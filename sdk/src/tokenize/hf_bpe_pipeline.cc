// The text side of the byte-level BPE tokenizer (hf_bpe.cc): tokenizer.json's normalizer and
// pre-tokenizer steps, read and applied (hf_bpe_pipeline.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tokenize/hf_bpe_pipeline.h"

namespace strata::tokenize_internal {

using json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// PCRE2 regex, compiled once, matched from any thread.

class Regex {
 public:
  static StatusOr<std::unique_ptr<Regex>> Compile(const std::string& pattern) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(error, buf, sizeof buf);
      return InvalidArgumentError("tokenizer.json: pre-tokenizer regex \"" + pattern +
                                  "\" does not compile with PCRE2 at offset " +
                                  std::to_string(offset) + ": " + reinterpret_cast<char*>(buf));
    }
    auto regex = std::unique_ptr<Regex>(new Regex());
    regex->code_ = code;
    regex->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    return regex;
  }
  ~Regex() { pcre2_code_free(code_); }

  // Appends (begin, end) of every non-overlapping match in subject[0, size) to `matches`.
  void FindAll(const char* subject, size_t size, std::vector<Piece>* matches) const {
    thread_local MatchState state;
    pcre2_match_data* md = state.Get(code_);
    size_t start = 0;
    while (start <= size) {
      int rc = jit_ ? pcre2_jit_match(code_, reinterpret_cast<PCRE2_SPTR>(subject), size, start, 0,
                                      md, state.context)
                    : pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(subject), size, start,
                                  PCRE2_NO_UTF_CHECK, md, state.context);
      if (rc < 0) break;  // no match (or a resource limit: the rest stays one piece)
      PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      size_t b = ov[0], e = ov[1];
      matches->push_back({b, e});
      if (e > b) {
        start = e;
      } else {
        // Empty match: continue after the next character.
        if (b >= size) break;
        size_t step = 1;
        while (b + step < size && (static_cast<unsigned char>(subject[b + step]) & 0xC0) == 0x80)
          ++step;
        start = b + step;
      }
    }
  }

 private:
  Regex() = default;
  struct MatchState {
    pcre2_match_data* data = nullptr;
    uint32_t capacity = 0;
    pcre2_match_context* context = nullptr;
    pcre2_jit_stack* stack = nullptr;
    MatchState() {
      context = pcre2_match_context_create(nullptr);
      stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
      if (stack != nullptr) pcre2_jit_stack_assign(context, nullptr, stack);
    }
    ~MatchState() {
      if (data != nullptr) pcre2_match_data_free(data);
      if (stack != nullptr) pcre2_jit_stack_free(stack);
      pcre2_match_context_free(context);
    }
    pcre2_match_data* Get(const pcre2_code* code) {
      uint32_t groups = 0;
      pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &groups);
      if (data == nullptr || capacity < groups + 1) {
        if (data != nullptr) pcre2_match_data_free(data);
        capacity = std::max<uint32_t>(groups + 1, 16);
        data = pcre2_match_data_create(capacity, nullptr);
      }
      return data;
    }
  };
  pcre2_code* code_ = nullptr;
  bool jit_ = false;
};

namespace {

// Escapes a literal for use inside a PCRE2 pattern.
std::string QuoteRegex(std::string_view s) { return "\\Q" + std::string(s) + "\\E"; }


// ---------------------------------------------------------------------------------------------
// Normalizers.


// How deep `Sequence` normalizers and pre-tokenizers may nest. Real files nest one level; the limit
// keeps a hostile file from overflowing the stack of the recursive parse below.
constexpr int kMaxSequenceDepth = 32;

Status SequenceTooDeep(const char* what) {
  return InvalidArgumentError(std::string("tokenizer.json: ") + what + " Sequence nested deeper than " +
                              std::to_string(kMaxSequenceDepth) +
                              " levels (the limit strata reads); flatten the Sequence");
}


bool IsAscii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

std::u16string ToUtf16(std::string_view s) {
  std::u16string out(s.size() + 1, u'\0');
  int32_t len = 0;
  UErrorCode err = U_ZERO_ERROR;
  u_strFromUTF8WithSub(reinterpret_cast<UChar*>(out.data()), static_cast<int32_t>(out.size()), &len,
                       s.data(), static_cast<int32_t>(s.size()), 0xFFFD, nullptr, &err);
  out.resize(U_SUCCESS(err) ? len : 0);
  return out;
}

std::string ToUtf8(const std::u16string& s) {
  std::string out(s.size() * 3 + 1, '\0');
  int32_t len = 0;
  UErrorCode err = U_ZERO_ERROR;
  u_strToUTF8WithSub(out.data(), static_cast<int32_t>(out.size()), &len,
                     reinterpret_cast<const UChar*>(s.data()), static_cast<int32_t>(s.size()),
                     0xFFFD, nullptr, &err);
  out.resize(U_SUCCESS(err) ? len : 0);
  return out;
}


}  // namespace

StatusOr<std::vector<NormKind>> ParseNormalizer(const json& j, int depth) {
  std::vector<NormKind> out;
  if (j.is_null()) return out;
  if (!j.is_object()) return InvalidArgumentError("tokenizer.json: a normalizer is not a JSON object");
  std::string type = j.value("type", "");
  if (type == "Sequence") {
    if (depth >= kMaxSequenceDepth) return SequenceTooDeep("normalizer");
    for (const json& sub : j.at("normalizers")) {
      STRATA_ASSIGN_OR_RETURN(std::vector<NormKind> part, ParseNormalizer(sub, depth + 1));
      out.insert(out.end(), part.begin(), part.end());
    }
    return out;
  }
  if (type == "NFC") return std::vector<NormKind>{NormKind::kNfc};
  if (type == "NFD") return std::vector<NormKind>{NormKind::kNfd};
  if (type == "NFKC") return std::vector<NormKind>{NormKind::kNfkc};
  if (type == "NFKD") return std::vector<NormKind>{NormKind::kNfkd};
  if (type == "Lowercase") return std::vector<NormKind>{NormKind::kLowercase};
  return InvalidArgumentError(
      "tokenizer.json: unsupported normalizer \"" + type +
      "\" (strata supports NFC, NFD, NFKC, NFKD, Lowercase and Sequence); "
      "use a byte-level BPE file such as GLM's, Qwen's or DeepSeek's, or the "
      "estimator (--tokenizer estimate)");
}


std::string ApplyNormalizer(NormKind kind, const std::string& text) {
  if (IsAscii(text)) {
    if (kind != NormKind::kLowercase) return text;
    std::string out = text;
    for (char& c : out)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
  }
  std::u16string src = ToUtf16(text);
  UErrorCode err = U_ZERO_ERROR;
  if (kind == NormKind::kLowercase) {
    std::u16string dst(src.size() * 2 + 4, u'\0');
    int32_t len = u_strToLower(
        reinterpret_cast<UChar*>(dst.data()), static_cast<int32_t>(dst.size()),
        reinterpret_cast<const UChar*>(src.data()), static_cast<int32_t>(src.size()), "", &err);
    if (U_FAILURE(err)) return text;
    dst.resize(len);
    return ToUtf8(dst);
  }
  const UNormalizer2* norm = nullptr;
  switch (kind) {
    case NormKind::kNfc:
      norm = unorm2_getNFCInstance(&err);
      break;
    case NormKind::kNfd:
      norm = unorm2_getNFDInstance(&err);
      break;
    case NormKind::kNfkc:
      norm = unorm2_getNFKCInstance(&err);
      break;
    case NormKind::kNfkd:
      norm = unorm2_getNFKDInstance(&err);
      break;
    default:
      break;
  }
  if (U_FAILURE(err) || norm == nullptr) return text;
  const UChar* usrc = reinterpret_cast<const UChar*>(src.data());
  int32_t yes = unorm2_spanQuickCheckYes(norm, usrc, static_cast<int32_t>(src.size()), &err);
  if (U_SUCCESS(err) && yes == static_cast<int32_t>(src.size())) return text;
  err = U_ZERO_ERROR;
  std::u16string dst(src.size() * 4 + 16, u'\0');
  int32_t len = unorm2_normalize(norm, usrc, static_cast<int32_t>(src.size()),
                                 reinterpret_cast<UChar*>(dst.data()),
                                 static_cast<int32_t>(dst.size()), &err);
  if (U_FAILURE(err)) return text;
  dst.resize(len);
  return ToUtf8(dst);
}


// ---------------------------------------------------------------------------------------------
// Pre-tokenizer steps.


namespace {

StatusOr<SplitBehavior> ParseBehavior(const std::string& s) {
  if (s == "Removed") return SplitBehavior::kRemoved;
  if (s == "Isolated") return SplitBehavior::kIsolated;
  if (s == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (s == "Contiguous") return SplitBehavior::kContiguous;
  return InvalidArgumentError("tokenizer.json: unsupported Split behavior \"" + s + "\"");
}



constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";


}  // namespace

PreStep::PreStep() = default;
PreStep::~PreStep() = default;
PreStep::PreStep(PreStep&&) noexcept = default;
PreStep& PreStep::operator=(PreStep&&) noexcept = default;

Status ParsePreTokenizer(const json& j, std::vector<PreStep>* steps, bool* has_byte_level,
                         int depth) {
  if (j.is_null()) return Status::Ok();
  if (!j.is_object()) return InvalidArgumentError("tokenizer.json: a pre-tokenizer is not a JSON object");
  std::string type = j.value("type", "");
  if (type == "Sequence") {
    if (depth >= kMaxSequenceDepth) return SequenceTooDeep("pre-tokenizer");
    for (const json& sub : j.at("pretokenizers"))
      STRATA_RETURN_IF_ERROR(ParsePreTokenizer(sub, steps, has_byte_level, depth + 1));
    return Status::Ok();
  }
  PreStep step;
  if (type == "Split") {
    const json& pattern = j.at("pattern");
    std::string regex;
    if (pattern.contains("Regex")) {
      regex = pattern.at("Regex").get<std::string>();
    } else if (pattern.contains("String")) {
      regex = QuoteRegex(pattern.at("String").get<std::string>());
    } else {
      return InvalidArgumentError(
          "tokenizer.json: Split pre-tokenizer pattern is neither Regex nor String");
    }
    STRATA_ASSIGN_OR_RETURN(step.regex, Regex::Compile(regex));
    STRATA_ASSIGN_OR_RETURN(step.behavior, ParseBehavior(j.value("behavior", "Isolated")));
    step.invert = j.value("invert", false);
  } else if (type == "ByteLevel") {
    *has_byte_level = true;
    step.add_prefix_space = j.value("add_prefix_space", false);
    if (j.value("use_regex", true)) {
      STRATA_ASSIGN_OR_RETURN(step.regex, Regex::Compile(kGpt2Pattern));
    }
    step.behavior = SplitBehavior::kIsolated;
  } else if (type == "Digits") {
    bool individual = j.value("individual_digits", false);
    STRATA_ASSIGN_OR_RETURN(step.regex, Regex::Compile("\\p{N}"));
    step.behavior = individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous;
    step.digits = true;
  } else {
    return InvalidArgumentError(
        "tokenizer.json: unsupported pre-tokenizer \"" + type +
        "\" (strata supports Split, ByteLevel, Digits and Sequence, as used by "
        "byte-level BPE files: GLM, Qwen, DeepSeek, Llama-3)");
  }
  steps->push_back(std::move(step));
  return Status::Ok();
}


// Splits piece `p` of `text` with the step's regex and behavior (NormalizedString::split).
void SplitPiece(const PreStep& step, const std::string& text, Piece p, std::vector<Piece>* out,
                std::vector<Piece>* scratch_matches, std::vector<std::pair<Piece, bool>>* scratch) {
  scratch_matches->clear();
  step.regex->FindAll(text.data() + p.begin, p.end - p.begin, scratch_matches);
  // The whole piece as (range in `text`, is_match) segments.
  auto& segs = *scratch;
  segs.clear();
  segs.reserve(2 * scratch_matches->size() + 1);
  size_t prev = p.begin;
  for (const Piece& m : *scratch_matches) {
    if (p.begin + m.begin > prev) segs.push_back({{prev, p.begin + m.begin}, false});
    segs.push_back({{p.begin + m.begin, p.begin + m.end}, true});
    prev = p.begin + m.end;
  }
  if (prev < p.end) segs.push_back({{prev, p.end}, false});
  if (step.invert)
    for (auto& s : segs) s.second = !s.second;
  // The pieces are written after what `out` holds (`first` on); empty ones are dropped at the end.
  const size_t first = out->size();
  auto written = [&] { return out->size() > first; };
  switch (step.behavior) {
    case SplitBehavior::kRemoved:
      for (auto& s : segs)
        if (!s.second) out->push_back(s.first);
      break;
    case SplitBehavior::kIsolated:
      for (auto& s : segs) out->push_back(s.first);
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (auto& s : segs) {
        if (s.second && !previous_match && written()) {
          out->back().end = s.first.end;
        } else {
          out->push_back(s.first);
        }
        previous_match = s.second;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous_match = false;
      for (size_t k = segs.size(); k-- > 0;) {
        auto& s = segs[k];
        if (s.second && !previous_match && written()) {
          out->back().begin = s.first.begin;
        } else {
          out->push_back(s.first);
        }
        previous_match = s.second;
      }
      std::reverse(out->begin() + static_cast<std::ptrdiff_t>(first), out->end());
      break;
    }
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (auto& s : segs) {
        if (written() && s.second == previous_match) {
          out->back().end = s.first.end;
        } else {
          out->push_back(s.first);
        }
        previous_match = s.second;
      }
      break;
    }
  }
  out->erase(std::remove_if(out->begin() + static_cast<std::ptrdiff_t>(first), out->end(),
                            [](const Piece& r) { return r.end <= r.begin; }),
             out->end());
}

}  // namespace strata::tokenize_internal
