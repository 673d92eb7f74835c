// Hugging Face tokenizer.json byte-level BPE, implemented after the reference `tokenizers` crate
// (tokenizers/src/models/bpe/word.rs for the merge loop, normalizer.rs Split behaviors,
// pre_tokenizers/byte_level.rs for the GPT-2 byte map, added_vocabulary.rs for added tokens).
//
// Pipeline of Encode(text):
//   1. split on added tokens (leftmost-longest), each match is one id;
//   2. each remaining span: normalizer, then the pre-tokenizer steps (each splits the pieces);
//   3. each piece: BPE over its bytes (byte-level: one initial symbol per byte), cached per piece.
// Steps 1 and 3 and reading the file are here; step 2 is in hf_bpe_pipeline.cc (hf_bpe_pipeline.h).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/thread_annotations.h"
#include "tokenize/exact_tokenizer.h"
#include "tokenize/hf_bpe_pipeline.h"
#include "tokenize/line_memo.h"

namespace strata::tokenize_internal {
namespace {

using json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// GPT-2 byte <-> unicode map (bytes_to_unicode in byte_level.rs).

struct ByteMap {
  std::string byte_to_utf8[256];
  std::unordered_map<uint32_t, uint8_t> codepoint_to_byte;
  ByteMap() {
    std::vector<int> bs;
    for (int b = '!'; b <= '~'; ++b) bs.push_back(b);
    for (int b = 0xA1; b <= 0xAC; ++b) bs.push_back(b);
    for (int b = 0xAE; b <= 0xFF; ++b) bs.push_back(b);
    std::vector<int> cs = bs;
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      if (std::find(bs.begin(), bs.end(), b) == bs.end()) {
        bs.push_back(b);
        cs.push_back(256 + n++);
      }
    }
    for (size_t i = 0; i < bs.size(); ++i) {
      uint32_t cp = static_cast<uint32_t>(cs[i]);
      std::string s;
      if (cp < 0x80) {
        s.push_back(static_cast<char>(cp));
      } else {
        s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
      byte_to_utf8[bs[i]] = s;
      codepoint_to_byte[cp] = static_cast<uint8_t>(bs[i]);
    }
  }
};

const ByteMap& GetByteMap() {
  static const ByteMap* map = new ByteMap();
  return *map;
}

// Decodes one UTF-8 sequence at s[i]; returns its length (0 if invalid) and the code point.
size_t Utf8Decode(std::string_view s, size_t i, uint32_t* cp) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t len;
  uint32_t v;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if ((c & 0xE0) == 0xC0) {
    len = 2;
    v = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    v = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    v = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    unsigned char cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    v = (v << 6) | (cc & 0x3F);
  }
  if ((len == 2 && v < 0x80) || (len == 3 && v < 0x800) ||
      (len == 4 && (v < 0x10000 || v > 0x10FFFF)) || (v >= 0xD800 && v <= 0xDFFF))
    return 0;
  *cp = v;
  return len;
}

// Byte-level token text (GPT-2 mapped characters) -> raw bytes; false if a character is not in the
// map.
bool ByteLevelToBytes(std::string_view token, std::string* out) {
  const ByteMap& map = GetByteMap();
  out->clear();
  for (size_t i = 0; i < token.size();) {
    uint32_t cp;
    size_t len = Utf8Decode(token, i, &cp);
    if (len == 0) return false;
    auto it = map.codepoint_to_byte.find(cp);
    if (it == map.codepoint_to_byte.end()) return false;
    out->push_back(static_cast<char>(it->second));
    i += len;
  }
  return true;
}

// Replaces invalid UTF-8 with U+FFFD (what a UTF-8 decoder with replacement produces per bad byte).
std::string SanitizeUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    size_t len = Utf8Decode(s, i, &cp);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.data() + i, len);
      i += len;
    }
  }
  return out;
}

bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    uint32_t cp;
    size_t len = Utf8Decode(s, i, &cp);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Merge table: open addressing, key (left id, right id) -> (rank, merged id).

class MergeTable {
 public:
  void Reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, Slot{kEmpty, 0, 0});
    mask_ = cap - 1;
  }
  // Keeps the first (lowest-rank) merge of a pair, as the reference does.
  void Insert(int32_t a, int32_t b, int32_t rank, int32_t id) {
    uint64_t key = Key(a, b);
    for (size_t i = Hash(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == kEmpty) {
        slots_[i] = Slot{key, rank, id};
        return;
      }
      if (slots_[i].key == key) return;
    }
  }
  // Rank and merged id of (a, b), or false.
  bool Find(int32_t a, int32_t b, int32_t* rank, int32_t* id) const {
    uint64_t key = Key(a, b);
    for (size_t i = Hash(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) {
        *rank = s.rank;
        *id = s.id;
        return true;
      }
      if (s.key == kEmpty) return false;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t key;
    int32_t rank;
    int32_t id;
  };
  static uint64_t Key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  static size_t Hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return static_cast<size_t>(k);
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// ---------------------------------------------------------------------------------------------

struct AddedToken {
  std::string content;
  int32_t id;
};

// Token ids index tables sized by the largest id, so each is checked before use: an integer, not
// negative and at most kMaxTokenId. Real vocabularies stay far below (GLM, Qwen, DeepSeek: < 160K).
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

StatusOr<int32_t> ReadTokenId(const json& value, const std::string& field) {
  // Only scalars are printed: dumping a (possibly deeply nested) container would recurse.
  std::string shown = value.is_primitive() ? value.dump(-1, ' ', false, json::error_handler_t::replace)
                                           : std::string("(a JSON ") + value.type_name() + ")";
  if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
  if (value.is_number_unsigned()) {
    if (value.get<uint64_t>() <= static_cast<uint64_t>(kMaxTokenId))
      return static_cast<int32_t>(value.get<uint64_t>());
  } else if (value.is_number_integer()) {
    const int64_t id = value.get<int64_t>();
    if (id >= 0 && id <= kMaxTokenId) return static_cast<int32_t>(id);
  } else {
    return InvalidArgumentError("tokenizer.json: " + field + " has id " + shown +
                                ", which is not an integer; token ids are integers 0.." +
                                std::to_string(kMaxTokenId));
  }
  return InvalidArgumentError("tokenizer.json: " + field + " has id " + shown +
                              ", outside the token id range 0.." + std::to_string(kMaxTokenId));
}

// Refuses a tokenizer.json "model" that is not a byte-level BPE strata can count exactly.
Status CheckByteLevelBpeModel(const json& model) {
  std::string model_type = model.value("type", model.contains("merges") ? "BPE" : "");
  if (model_type != "BPE")
    return InvalidArgumentError("tokenizer.json: unsupported model \"" + model_type +
                                "\" (strata implements byte-level BPE only; for SentencePiece "
                                "models use --tokenizer spm:PATH/model.model)");
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      model["dropout"].get<double>() != 0.0)
    return InvalidArgumentError(
        "tokenizer.json: BPE dropout is not supported (counts must be exact)");
  if (model.value("byte_fallback", false))
    return InvalidArgumentError(
        "tokenizer.json: BPE byte_fallback (a SentencePiece-converted model) is not supported; "
        "use the model's tokenizer.model with --tokenizer spm:PATH");
  for (const char* field : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(field) && model[field].is_string() &&
        !model[field].get<std::string>().empty())
      return InvalidArgumentError(std::string("tokenizer.json: BPE ") + field +
                                  " is not supported (not a byte-level BPE file)");
  }
  return Status();
}

// The token ids a tokenizer.json declares, read before the id tables are sized.
struct DeclaredIds {
  std::unordered_map<std::string, int32_t> vocab;  // byte-level strings -> ids
  std::vector<int32_t> added_ids;                  // added_tokens[i]'s id
  int32_t max_id = -1;
  std::string max_id_field;  // where max_id is declared, for the error message
};

// Reads model.vocab (`jvocab`) into `ids`.
Status ReadVocab(const json& jvocab, DeclaredIds* ids) {
  if (!jvocab.is_object())
    return InvalidArgumentError("tokenizer.json: model.vocab is not an object of token -> id");
  ids->vocab.reserve(jvocab.size());
  for (auto it = jvocab.begin(); it != jvocab.end(); ++it) {
    const std::string field = "model.vocab entry \"" + it.key().substr(0, 40) + "\"";
    STRATA_ASSIGN_OR_RETURN(int32_t id, ReadTokenId(it.value(), field));
    ids->vocab.emplace(it.key(), id);
    if (id > ids->max_id) ids->max_id = id, ids->max_id_field = field;
  }
  return Status();
}

// Reads the ids of added_tokens (`jadded`, an empty array when the file has none) into `ids`.
Status ReadAddedTokenIds(const json& jadded, DeclaredIds* ids) {
  if (!jadded.is_array())
    return InvalidArgumentError("tokenizer.json: added_tokens is not an array");
  for (size_t i = 0; i < jadded.size(); ++i) {
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    if (!jadded[i].is_object() || !jadded[i].contains("id"))
      return InvalidArgumentError("tokenizer.json: " + field + " is not an object with an id");
    STRATA_ASSIGN_OR_RETURN(int32_t id, ReadTokenId(jadded[i].at("id"), field));
    ids->added_ids.push_back(id);
    if (id > ids->max_id) ids->max_id = id, ids->max_id_field = field;
  }
  return Status();
}

class HfBpeTokenizer final : public ExactTokenizer {
 public:
  static StatusOr<std::unique_ptr<ExactTokenizer>> Load(std::string_view json_text,
                                                        std::string name);

  std::string Name() const override { return "hf-bpe:" + name_; }

  std::vector<int32_t> Encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 4);
    if (IsValidUtf8(text)) {
      EncodeValid(text, &ids);
    } else {
      EncodeValid(SanitizeUtf8(text), &ids);
    }
    return ids;
  }

  size_t Count(std::string_view text) const override { return Encode(text).size(); }

  // Two kinds of cut (each only where no added token could match across it, since added tokens
  // are matched on the raw text first, leftmost):
  //  - before an added token: the tokenizer itself splits the text there (any pre-tokenizer);
  //  - after a newline that ends a line with a visible ASCII character (a line "...x\n" followed by
  //    a visible ASCII character): the newline is its own pre-tokenizer piece and nothing merges
  //    into the next line, whatever the bytes around it. That holds for the pre-tokenizer regexes
  //    of the byte-level BPE files strata reads (GPT-2's, Llama-3's, Qwen's, DeepSeek's, GLM's),
  //    which never join a newline with a following visible character; since a file may carry any
  //    regex, it is checked on this file's own pre-tokenizer once (NewlineCutsHold) and these cuts
  //    are not used when a probe disagrees, when a pre-tokenizer adds a prefix space to each piece,
  //    or when a Split step merges pieces (MergedWithPrevious/Next, Contiguous other than Digits).
  void FindCuts(std::string_view text, size_t from, std::vector<size_t>* cuts) const override {
    const bool newline = NewlineCutsHold();
    for (size_t c = from + 1; c < text.size(); ++c) {
      const unsigned char here = static_cast<unsigned char>(text[c]);
      bool candidate = false;
      if (newline && text[c - 1] == '\n' && c >= 2 && IsVisibleAscii(text[c - 2]) &&
          IsVisibleAscii(text[c])) {
        candidate = true;
      } else if (added_first_byte_[here]) {
        for (const AddedToken* t : added_by_first_byte_[here]) {
          if (text.compare(c, t->content.size(), t->content) == 0) {
            candidate = true;
            break;
          }
        }
      }
      if (candidate && !AddedTokenAcross(text, c)) cuts->push_back(c);
    }
  }

  size_t CutContext() const override { return std::max<size_t>(max_added_size_, 1); }

  StatusOr<std::string> Decode(const std::vector<int32_t>& ids) const override {
    std::string out;
    for (int32_t id : ids) {
      if (id < 0 || static_cast<size_t>(id) >= id_to_bytes_.size() || !id_known_[id])
        return OutOfRangeError("token id " + std::to_string(id) + " is not in the vocabulary of " +
                               Name() + " (ids 0.." + std::to_string(id_to_bytes_.size() - 1) +
                               ")");
      out += id_to_bytes_[id];
    }
    return out;
  }

  StatusOr<int32_t> TokenId(std::string_view token) const override {
    for (const AddedToken& t : added_)
      if (t.content == token) return t.id;
    auto it = bytes_to_id_.find(std::string(token));
    if (it != bytes_to_id_.end()) return it->second;
    return NotFoundError("no token \"" + std::string(token) + "\" in " + Name());
  }

 private:
  static bool IsVisibleAscii(char c) { return c > ' ' && c < 0x7f; }

  // True when an added token could match text[p, p + size) with p < c < p + size.
  bool AddedTokenAcross(std::string_view text, size_t c) const {
    const size_t first = c + 1 > max_added_size_ ? c + 1 - max_added_size_ : 0;
    for (size_t p = first; p < c; ++p) {
      for (const AddedToken* t : added_by_first_byte_[static_cast<unsigned char>(text[p])]) {
        if (p + t->content.size() > c && text.compare(p, t->content.size(), t->content) == 0)
          return true;
      }
    }
    return false;
  }

  // Whether newline cuts (see FindCuts) hold for this file: its pipeline allows them and, for
  // every pair of visible ASCII characters a, b and a few neighbours, a line ending in "a\n"
  // followed by one starting with b encodes to the ids of the two lines encoded apart. Computed
  // once, on first use.
  bool NewlineCutsHold() const {
    std::call_once(newline_cuts_once_, [this] {
      newline_cuts_ = false;
      for (const PreStep& step : pre_steps_) {
        if (step.add_prefix_space) return;
        if (!step.regex) continue;
        const bool splits = step.behavior == SplitBehavior::kIsolated ||
                            step.behavior == SplitBehavior::kRemoved ||
                            (step.behavior == SplitBehavior::kContiguous && step.digits);
        if (!splits) return;
      }
      static constexpr const char* kBefore[] = {"w", " ", "\n", "9", "\xc3\xa9"};
      static constexpr const char* kAfter[] = {"yz", " q", "\n", "7", "\xe4\xb8\xad", "  "};
      size_t k = 0;
      for (char a = '!'; a < 0x7f; ++a) {
        for (char b = '!'; b < 0x7f; ++b, ++k) {
          const std::string first = std::string("x") + kBefore[k % 5] + a + "\n";
          const std::string second = std::string(1, b) + kAfter[k % 6];
          if (AddedTokenAcross(first + second, first.size())) continue;
          std::vector<int32_t> apart = Encode(first), rest = Encode(second);
          apart.insert(apart.end(), rest.begin(), rest.end());
          if (apart != Encode(first + second)) return;
        }
      }
      newline_cuts_ = true;
      lines_cut_.store(true, std::memory_order_release);
    });
    return newline_cuts_;
  }

  // A span encoded line by line at the newline cuts of FindCuts once they are known to hold, each
  // line of up to kMaxCachedLineBytes through the cache of lines (lines_, kMaxLineCacheBytes
  // charged at most): a text counted alone and then encoded again inside a prompt (a tool
  // result's count at append, then the request's count) pays for its lines once. Until the check
  // has run (on the first FindCuts: it encodes, so it cannot wait for itself) a span is encoded
  // whole.
  void EncodeLines(std::string_view span, std::vector<int32_t>* ids) const {
    if (!lines_cut_.load(std::memory_order_acquire)) return EncodeSpan(span, ids);
    size_t start = 0;
    for (size_t nl = span.find('\n', 1); nl != std::string_view::npos && nl + 1 < span.size();
         nl = span.find('\n', nl + 1)) {
      if (IsVisibleAscii(span[nl - 1]) && IsVisibleAscii(span[nl + 1])) {
        EncodeLine(span.substr(start, nl + 1 - start), ids);
        start = nl + 1;
      }
    }
    if (start < span.size()) EncodeLine(span.substr(start), ids);
  }

  void EncodeLine(std::string_view line, std::vector<int32_t>* ids) const {
    if (line.size() > kMaxCachedLineBytes) return EncodeSpan(line, ids);
    if (lines_.AppendKept(line, ids)) return;
    const size_t before = ids->size();
    EncodeSpan(line, ids);
    lines_.Keep(line, ids->data() + before, ids->size() - before);
  }

  void EncodeValid(std::string_view text, std::vector<int32_t>* ids) const {
    size_t start = 0;
    for (size_t i = 0; i < text.size();) {
      unsigned char c = static_cast<unsigned char>(text[i]);
      if (added_first_byte_[c]) {
        const AddedToken* match = nullptr;
        for (const AddedToken* t : added_by_first_byte_[c]) {  // longest first
          if (text.size() - i >= t->content.size() &&
              std::memcmp(text.data() + i, t->content.data(), t->content.size()) == 0) {
            match = t;
            break;
          }
        }
        if (match != nullptr) {
          if (i > start) EncodeLines(text.substr(start, i - start), ids);
          ids->push_back(match->id);
          i += match->content.size();
          start = i;
          continue;
        }
      }
      ++i;
    }
    if (start < text.size()) EncodeLines(text.substr(start), ids);
  }

  void EncodeSpan(std::string_view span, std::vector<int32_t>* ids) const {
    std::string text(span);
    for (NormKind k : normalizers_) text = ApplyNormalizer(k, text);
    // The pieces and the splits' scratch keep their memory between calls on this thread (up to
    // kKeptScratchPieces each): a call's text splits into about a piece per token, and growing
    // them afresh each time was a tenth of an exact count.
    thread_local std::vector<Piece> pieces, next, matches;
    thread_local std::vector<std::pair<Piece, bool>> segs;
    pieces.assign(1, Piece{0, text.size()});
    struct LetGo {  // a long text's scratch is not kept
      ~LetGo() {
        if (pieces.capacity() > kKeptScratchPieces) std::vector<Piece>().swap(pieces);
        if (next.capacity() > kKeptScratchPieces) std::vector<Piece>().swap(next);
        if (matches.capacity() > kKeptScratchPieces) std::vector<Piece>().swap(matches);
        if (segs.capacity() > kKeptScratchPieces) std::vector<std::pair<Piece, bool>>().swap(segs);
      }
    } let_go;
    for (const PreStep& step : pre_steps_) {
      if (step.add_prefix_space) {
        // ByteLevel(add_prefix_space) prepends a space to every piece that lacks one: rebuild the
        // text.
        std::string rebuilt;
        std::vector<Piece> moved;
        for (const Piece& p : pieces) {
          size_t b = rebuilt.size();
          if (text[p.begin] != ' ') rebuilt.push_back(' ');
          rebuilt.append(text, p.begin, p.end - p.begin);
          moved.push_back({b, rebuilt.size()});
        }
        text.swap(rebuilt);
        pieces.swap(moved);
      }
      if (!step.regex) continue;
      next.clear();
      for (const Piece& p : pieces) SplitPiece(step, text, p, &next, &matches, &segs);
      pieces.swap(next);
    }
    for (const Piece& p : pieces)
      EncodeWord(std::string_view(text).substr(p.begin, p.end - p.begin), ids);
  }

  void EncodeWord(std::string_view word, std::vector<int32_t>* ids) const {
    if (word.size() == 1) {
      ids->push_back(byte_to_id_[static_cast<unsigned char>(word[0])]);
      return;
    }
    std::string key(word);
    if (ignore_merges_) {
      auto it = bytes_to_id_.find(key);
      if (it != bytes_to_id_.end()) {
        ids->push_back(it->second);
        return;
      }
    }
    {
      internal::MutexLock lock(cache_mutex_);
      auto it = cache_.find(key);
      if (it != cache_.end()) {
        ids->insert(ids->end(), it->second.begin(), it->second.end());
        return;
      }
    }
    size_t before = ids->size();
    MergeWord(word, ids);
    if (word.size() <= kMaxCachedWordBytes) {
      std::vector<int32_t> value(ids->begin() + before, ids->end());
      internal::MutexLock lock(cache_mutex_);
      if (cache_.size() >= kMaxCacheEntries) cache_.clear();
      cache_.emplace(std::move(key), std::move(value));
    }
  }

  // The BPE merge loop of word.rs: repeatedly merge the adjacent pair with the lowest rank
  // (leftmost first among equal ranks), symbols kept in a doubly linked list, candidates in a
  // min-heap.
  void MergeWord(std::string_view word, std::vector<int32_t>* ids) const {
    const int n = static_cast<int>(word.size());
    std::vector<int32_t> sym(n);
    std::vector<int> prev(n), next(n);
    for (int i = 0; i < n; ++i) {
      sym[i] = byte_to_id_[static_cast<unsigned char>(word[i])];
      prev[i] = i - 1;
      next[i] = i + 1 < n ? i + 1 : -1;
    }
    struct Cand {
      int32_t rank;
      int pos;
      int32_t left, right, merged;
      bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::vector<Cand> heap_storage;
    heap_storage.reserve(n);
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap(std::greater<Cand>(),
                                                                          std::move(heap_storage));
    auto consider = [&](int pos) {
      int nx = next[pos];
      if (pos < 0 || nx < 0) return;
      int32_t rank, merged;
      if (merges_.Find(sym[pos], sym[nx], &rank, &merged))
        heap.push({rank, pos, sym[pos], sym[nx], merged});
    };
    for (int i = 0; i + 1 < n; ++i) consider(i);
    while (!heap.empty()) {
      Cand c = heap.top();
      heap.pop();
      if (sym[c.pos] != c.left || next[c.pos] < 0 || sym[next[c.pos]] != c.right) continue;
      int right = next[c.pos];
      sym[c.pos] = c.merged;
      sym[right] = -1;
      next[c.pos] = next[right];
      if (next[right] >= 0) prev[next[right]] = c.pos;
      if (prev[c.pos] >= 0) consider(prev[c.pos]);
      consider(c.pos);
    }
    for (int i = 0; i >= 0; i = next[i]) ids->push_back(sym[i]);
  }

  // Load's steps, one section of tokenizer.json each (a json exception is Load's to catch).
  // The normalizer and pre-tokenizer; refuses a pipeline without a ByteLevel step.
  Status ReadPipeline(const json& doc);
  // Sizes and fills the id <-> bytes tables and the byte -> id table from the declared ids.
  Status BuildIdTables(const DeclaredIds& ids);
  // model.merges, ranked by position; a merge whose parts or result are not in `vocab` is skipped.
  Status ReadMerges(const json& jmerges, const std::unordered_map<std::string, int32_t>& vocab);
  // The added tokens' contents (`jadded[i]` has id `added_ids[i]`) and their first-byte index.
  Status ReadAddedTokens(const json& jadded, const std::vector<int32_t>& added_ids);

  static constexpr size_t kMaxCachedWordBytes = 256;
  static constexpr size_t kMaxCacheEntries = 200000;
  static constexpr size_t kKeptScratchPieces = 16384;
  static constexpr size_t kMaxCachedLineBytes = 1024;
  // The cache of lines starts over past this many bytes charged (LineMemo::Charge).
  static constexpr size_t kMaxLineCacheBytes = size_t{4} << 20;

  std::string name_;
  std::vector<NormKind> normalizers_;
  std::vector<PreStep> pre_steps_;
  bool ignore_merges_ = false;
  int32_t byte_to_id_[256];
  MergeTable merges_;
  std::unordered_map<std::string, int32_t> bytes_to_id_;  // raw bytes of a vocabulary entry -> id
  std::vector<std::string> id_to_bytes_;
  std::vector<bool> id_known_;
  std::vector<AddedToken> added_;
  bool added_first_byte_[256] = {};
  std::vector<const AddedToken*> added_by_first_byte_[256];

  size_t max_added_size_ = 0;  // bytes of the longest added token
  mutable std::once_flag newline_cuts_once_;
  mutable bool newline_cuts_ = false;  // written once under newline_cuts_once_
  mutable std::atomic<bool> lines_cut_{false};  // set once newline_cuts_ is known to be true
  // Each line EncodeLine encoded, with its ids.
  mutable LineMemo lines_{kMaxLineCacheBytes};

  mutable internal::Mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_ STRATA_GUARDED_BY(cache_mutex_);
};

StatusOr<std::unique_ptr<ExactTokenizer>> HfBpeTokenizer::Load(std::string_view json_text,
                                                               std::string name) {
  json doc = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object())
    return DataLossError("tokenizer.json " + name + " is not valid JSON");
  auto tok = std::unique_ptr<HfBpeTokenizer>(new HfBpeTokenizer());
  tok->name_ = std::move(name);
  try {
    const json& model = doc.at("model");
    STRATA_RETURN_IF_ERROR(CheckByteLevelBpeModel(model));
    tok->ignore_merges_ = model.value("ignore_merges", false);
    STRATA_RETURN_IF_ERROR(tok->ReadPipeline(doc));
    DeclaredIds ids;
    STRATA_RETURN_IF_ERROR(ReadVocab(model.at("vocab"), &ids));
    static const json kNoAdded = json::array();
    auto added_it = doc.find("added_tokens");
    const json& jadded = added_it == doc.end() || added_it->is_null() ? kNoAdded : *added_it;
    STRATA_RETURN_IF_ERROR(ReadAddedTokenIds(jadded, &ids));
    STRATA_RETURN_IF_ERROR(tok->BuildIdTables(ids));
    STRATA_RETURN_IF_ERROR(tok->ReadMerges(model.at("merges"), ids.vocab));
    STRATA_RETURN_IF_ERROR(tok->ReadAddedTokens(jadded, ids.added_ids));
  } catch (const json::exception& e) {
    return DataLossError("tokenizer.json " + tok->name_ + " is malformed: " + e.what());
  }
  return std::unique_ptr<ExactTokenizer>(std::move(tok));
}

Status HfBpeTokenizer::ReadPipeline(const json& doc) {
  // Found, never copied: json's copy is recursive and the subtree may be hostile.
  static const json kNull;
  auto normalizer = doc.find("normalizer");
  STRATA_ASSIGN_OR_RETURN(normalizers_,
                          ParseNormalizer(normalizer == doc.end() ? kNull : *normalizer));
  bool has_byte_level = false;
  auto pre_tokenizer = doc.find("pre_tokenizer");
  STRATA_RETURN_IF_ERROR(ParsePreTokenizer(pre_tokenizer == doc.end() ? kNull : *pre_tokenizer,
                                           &pre_steps_, &has_byte_level));
  if (!has_byte_level)
    return InvalidArgumentError(
        "tokenizer.json: the pre-tokenizer has no ByteLevel step, so this is not a byte-level "
        "BPE file (strata supports GLM/Qwen/DeepSeek/Llama-3/GPT-2 style files)");
  return Status();
}

Status HfBpeTokenizer::BuildIdTables(const DeclaredIds& ids) {
  // The id tables are dense: ids may leave gaps (files reserve ids), but not so many that a small
  // file makes strata allocate gigabytes.
  const int64_t id_limit =
      2 * static_cast<int64_t>(ids.vocab.size() + ids.added_ids.size()) + 65536;
  if (ids.max_id >= id_limit)
    return InvalidArgumentError(
        "tokenizer.json: " + ids.max_id_field + " has id " + std::to_string(ids.max_id) +
        ", but the file has only " + std::to_string(ids.vocab.size()) + " vocabulary and " +
        std::to_string(ids.added_ids.size()) + " added tokens; ids must stay below " +
        std::to_string(id_limit) + " (twice the token count plus 65536)");
  id_to_bytes_.assign(ids.max_id + 1, std::string());
  id_known_.assign(ids.max_id + 1, false);
  bytes_to_id_.reserve(ids.vocab.size());
  std::string raw;
  for (const auto& [text, id] : ids.vocab) {
    if (!ByteLevelToBytes(text, &raw)) raw = text;
    id_to_bytes_[id] = raw;
    id_known_[id] = true;
    bytes_to_id_.emplace(raw, id);
  }
  const ByteMap& bm = GetByteMap();
  for (int b = 0; b < 256; ++b) {
    auto it = ids.vocab.find(bm.byte_to_utf8[b]);
    if (it == ids.vocab.end())
      return InvalidArgumentError(
          "tokenizer.json: byte-level vocabulary lacks the symbol for byte " + std::to_string(b) +
          "; not a byte-level BPE file");
    byte_to_id_[b] = it->second;
  }
  return Status();
}

Status HfBpeTokenizer::ReadMerges(const json& jmerges,
                                  const std::unordered_map<std::string, int32_t>& vocab) {
  // "a b" strings (older files) or ["a", "b"] pairs.
  merges_.Reserve(jmerges.size());
  int32_t rank = 0;
  for (const json& m : jmerges) {
    std::string a, b;
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      size_t sp = s.find(' ', 1);
      if (sp == std::string::npos)
        return DataLossError("tokenizer.json: merge \"" + s + "\" is not \"left right\"");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else {
      a = m.at(0).get<std::string>();
      b = m.at(1).get<std::string>();
    }
    auto ia = vocab.find(a), ib = vocab.find(b), im = vocab.find(a + b);
    if (ia != vocab.end() && ib != vocab.end() && im != vocab.end())
      merges_.Insert(ia->second, ib->second, rank, im->second);
    ++rank;
  }
  return Status();
}

Status HfBpeTokenizer::ReadAddedTokens(const json& jadded, const std::vector<int32_t>& added_ids) {
  for (size_t i = 0; i < jadded.size(); ++i) {
    const json& t = jadded[i];
    AddedToken at{t.at("content").get<std::string>(), added_ids[i]};
    if (t.value("lstrip", false) || t.value("rstrip", false) || t.value("single_word", false))
      return InvalidArgumentError(
          "tokenizer.json: added token \"" + at.content +
          "\" uses lstrip/rstrip/single_word, which strata does not support");
    if (at.content.empty()) continue;
    id_to_bytes_[at.id] = at.content;
    id_known_[at.id] = true;
    added_.push_back(std::move(at));
  }
  for (const AddedToken& t : added_) {
    unsigned char c = static_cast<unsigned char>(t.content[0]);
    added_first_byte_[c] = true;
    added_by_first_byte_[c].push_back(&t);
    max_added_size_ = std::max(max_added_size_, t.content.size());
  }
  for (auto& list : added_by_first_byte_)
    std::stable_sort(list.begin(), list.end(), [](const AddedToken* x, const AddedToken* y) {
      return x->content.size() > y->content.size();
    });
  return Status();
}

}  // namespace

StatusOr<std::unique_ptr<ExactTokenizer>> MakeHfBpe(std::string_view json_text, std::string name) {
  return HfBpeTokenizer::Load(json_text, std::move(name));
}

}  // namespace strata::tokenize_internal
