// ChunkText: the text of the last chunk of a list stored in chunks, kept as stored (private to
// strata; any component that links strata::core may include it). A list that grows by a few
// entries a turn and is stored in chunks of N entries rewrites its last chunk on every turn; with
// the chunk's text kept, a turn that only appends encodes only the entries it appends. The Agent's
// prefix-cache signatures and the sidecar proxy's client view are stored so.
//
// What is kept changes when a write is stored (Stored()): after a write whose commit failed, the
// kept text is the chunk as the store holds it, or nothing when that write began its chunk anew
// (the next write then encodes the chunk whole). Thread safety: none (a value of its owner's).
#ifndef STRATA_CORE_CHUNK_TEXT_H_
#define STRATA_CORE_CHUNK_TEXT_H_

#include <cstddef>
#include <string>

namespace strata::internal {

class ChunkText {
 public:
  // The entries of chunk `chunk` (entries [begin, end) of the list) as they are inside the chunk's
  // array (no brackets), when the list's first `unchanged` entries are as last stored:
  // `append(from, end, first, &text)` appends entries [from, end) to text (`first` when none
  // precede them there), called for the entries after the kept ones, or for all of them. The
  // result is what a Stored() after this write keeps (the last chunk a write writes is the one
  // kept). The text is continued in place: the bytes past what was stored are cut first.
  template <typename AppendEntries>
  const std::string& Write(size_t chunk, size_t begin, size_t end, size_t unchanged,
                           const AppendEntries& append) {
    size_t kept = 0;
    if (chunk == chunk_ && stored_entries_ > 0 && unchanged >= begin + stored_entries_ &&
        end >= begin + stored_entries_) {
      kept = stored_entries_;
      text_.resize(stored_bytes_);
    } else {
      // Another chunk, or this one changed: the stored text is given up (until this write is
      // stored, nothing is kept).
      text_.clear();
      chunk_ = chunk;
      stored_entries_ = 0;
    }
    append(begin + kept, end, kept == 0, &text_);
    encoded_ += end - begin - kept;
    written_entries_ = end - begin;
    written_ = true;
    return text_;
  }
  // A new write begins: until Write() is called, storing it keeps the chunk as stored.
  void Begin() { written_ = false; }
  // The last write was committed.
  void Stored() {
    if (written_) {
      stored_entries_ = written_entries_;
      stored_bytes_ = text_.size();
    }
    written_ = false;
  }
  // Nothing kept (the list was read back, or replaced): the next write encodes its chunk whole.
  void Reset() {
    stored_entries_ = 0;
    written_ = false;
  }

  size_t kept_bytes() const { return text_.capacity(); }
  // How many entries Write() has encoded (for tests).
  size_t encoded() const { return encoded_; }

 private:
  size_t chunk_ = 0;            // the chunk text_ is of
  size_t stored_entries_ = 0;   // its entries as stored (0: nothing kept)
  size_t stored_bytes_ = 0;     // and their bytes, text_'s first
  std::string text_;            // the stored entries, then what the last write added
  size_t written_entries_ = 0;  // the entries the last write left in text_
  bool written_ = false;
  size_t encoded_ = 0;
};

}  // namespace strata::internal

#endif  // STRATA_CORE_CHUNK_TEXT_H_
