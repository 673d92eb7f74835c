// IncrementalEncoder and StreamEncoder (strata/tokenizer_spec.h): encoding only what is new, at the
// places a tokenizer allows a text to be cut (ExactTokenizer::FindCuts: the pieces between cuts
// encode to the ids of the whole text).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/estimate_tokenizer.h"
#include "core/text_util.h"
#include "strata/tokenizer_spec.h"
#include "tokenize/exact_tokenizer.h"

namespace strata {

namespace tokenize_internal {

}  // namespace tokenize_internal

using internal::CommonPrefix;

struct IncrementalEncoder::State {
  const Tokenizer* tokenizer;
  const tokenize_internal::ExactTokenizer* exact;  // null: no cuts
  bool valid = false;     // text and checkpoints describe the previous text
  bool with_ids = false;  // ids are the previous text's ids
  std::string text;
  // (offset, tokens of text[0, offset)) at each cut, ascending, after (0, 0).
  std::vector<std::pair<size_t, size_t>> checkpoints;
  size_t total = 0;  // tokens of text
  size_t unchanged = 0;  // leading tokens the last Update kept from the one before
  std::vector<int32_t> ids;
  std::vector<size_t> cuts;  // scratch

  // `known`: leading bytes the caller knows `next` shares with `text` (not compared again).
  size_t Update(std::string_view next, bool want_ids, size_t known = 0) {
    if (tokenizer->IsEstimate()) {  // no ids, no state: a count costs the length
      valid = false;
      unchanged = 0;
      ids.clear();
      text.clear();
      return tokenizer->Count(next);
    }
    // One pass over the texts: the common prefix also tells whether the text is unchanged.
    known = std::min({known, text.size(), next.size()});
    const size_t prefix =
        valid ? known + CommonPrefix(std::string_view(text).substr(known), next.substr(known)) : 0;
    if (valid && (with_ids || !want_ids) && prefix == text.size() && prefix == next.size()) {
      unchanged = total;
      return total;
    }
    unchanged = 0;
    if (want_ids && !with_ids) valid = false;  // the kept state has counts only
    if (!valid || exact == nullptr) checkpoints.clear();
    // A cut holds in the new text when the bytes its validity depends on are in the common prefix.
    const size_t context = exact != nullptr ? exact->CutContext() : 0;
    while (!checkpoints.empty() && checkpoints.back().first > 0 &&
           checkpoints.back().first + context > prefix)
      checkpoints.pop_back();
    if (checkpoints.empty()) checkpoints.emplace_back(0, 0);
    size_t start = checkpoints.back().first;
    size_t tokens = checkpoints.back().second;
    unchanged = tokens;
    if (want_ids) ids.resize(tokens);
    cuts.clear();
    if (exact != nullptr) exact->FindCuts(next, start, &cuts);
    cuts.push_back(next.size());
    for (size_t cut : cuts) {
      if (cut > start) {
        const std::string_view piece = next.substr(start, cut - start);
        if (want_ids) {
          const std::vector<int32_t> piece_ids = tokenizer->Encode(piece);
          ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
          tokens += piece_ids.size();
        } else {
          tokens += tokenizer->Count(piece);
        }
      }
      if (cut < next.size()) checkpoints.emplace_back(cut, tokens);
      start = cut;
    }
    text.resize(std::min(prefix, text.size()));
    internal::AppendGrowing(text, next.substr(text.size()));  // the next texts continue it
    valid = true;
    with_ids = want_ids;
    total = tokens;
    return tokens;
  }
};

IncrementalEncoder::IncrementalEncoder(const Tokenizer& tokenizer) : state_(std::make_unique<State>()) {
  state_->tokenizer = &tokenizer;
  state_->exact = dynamic_cast<const tokenize_internal::ExactTokenizer*>(&tokenizer);
}
IncrementalEncoder::~IncrementalEncoder() = default;
IncrementalEncoder::IncrementalEncoder(IncrementalEncoder&&) noexcept = default;
IncrementalEncoder& IncrementalEncoder::operator=(IncrementalEncoder&&) noexcept = default;

const std::vector<int32_t>& IncrementalEncoder::Encode(std::string_view text) {
  state_->Update(text, /*want_ids=*/true);
  return state_->ids;
}

const std::vector<int32_t>& IncrementalEncoder::Encode(std::string_view text,
                                                       size_t known_prefix) {
  state_->Update(text, /*want_ids=*/true, known_prefix);
  return state_->ids;
}

size_t IncrementalEncoder::Count(std::string_view text) { return state_->Update(text, /*want_ids=*/false); }

size_t IncrementalEncoder::Count(std::string_view text, size_t known_prefix) {
  return state_->Update(text, /*want_ids=*/false, known_prefix);
}

const std::string& IncrementalEncoder::text() const { return state_->text; }

size_t IncrementalEncoder::unchanged() const { return state_->unchanged; }


// ---------------------------------------------------------------------------------------------
// StreamEncoder.

struct StreamEncoder::State {
  const Tokenizer* tokenizer;
  const tokenize_internal::ExactTokenizer* exact;  // null: no cuts
  std::string pending;  // text not encoded yet
  size_t tokens = 0;
  uint64_t estimate_bytes = 0;  // estimators: bytes seen
  std::vector<size_t> cuts;     // scratch

  void Emit(std::string_view piece, std::vector<int32_t>* ids) {
    if (piece.empty()) return;
    if (ids != nullptr) {
      const std::vector<int32_t> piece_ids = tokenizer->Encode(piece);
      ids->insert(ids->end(), piece_ids.begin(), piece_ids.end());
      tokens += piece_ids.size();
    } else {
      tokens += tokenizer->Count(piece);
    }
  }
};

StreamEncoder::StreamEncoder(const Tokenizer& tokenizer) : state_(std::make_unique<State>()) {
  state_->tokenizer = &tokenizer;
  state_->exact = dynamic_cast<const tokenize_internal::ExactTokenizer*>(&tokenizer);
}
StreamEncoder::~StreamEncoder() = default;

void StreamEncoder::Append(std::string_view chunk, std::vector<int32_t>* ids) {
  State& s = *state_;
  if (internal::EstimateCountForBytes(*s.tokenizer, 0)) {
    s.estimate_bytes += chunk.size();
    return;
  }
  s.pending.append(chunk);
  if (s.exact == nullptr) return;
  // Encode up to the last cut whose validity depends only on bytes already here.
  s.cuts.clear();
  s.exact->FindCuts(s.pending, 0, &s.cuts);
  const size_t context = s.exact->CutContext();
  size_t last = 0;
  for (size_t cut : s.cuts) {
    if (cut + context > s.pending.size()) break;
    last = cut;
  }
  if (last == 0) return;
  s.Emit(std::string_view(s.pending).substr(0, last), ids);
  s.pending.erase(0, last);
}

size_t StreamEncoder::Finish(std::vector<int32_t>* ids) {
  State& s = *state_;
  if (std::optional<size_t> estimate = internal::EstimateCountForBytes(*s.tokenizer, s.estimate_bytes))
    return *estimate;  // strata's estimator counts the length alone
  s.Emit(s.pending, ids);
  s.pending.clear();
  s.pending.shrink_to_fit();
  return s.tokens;
}

size_t StreamEncoder::pending_bytes() const { return state_->pending.size(); }

}  // namespace strata
