// ChunkText: the text of the last chunk of a list stored in chunks, kept as stored (private to
// strata; any component that links strata::core may include it). A list that grows by a few
// entries a turn and is stored in chunks of N entries rewrites its last chunk on every turn; with
// the chunk's text kept, a turn that only appends encodes only the entries it appends. The Agent's
// prefix-cache signatures and the sidecar proxy's client view are stored so.
//
// The kept text changes only when a write is stored (Stored()): a write whose commit failed
// leaves it describing the chunk as the store holds it. Thread safety: none (a value of its
// owner's).
#ifndef STRATA_CORE_CHUNK_TEXT_H_
#define STRATA_CORE_CHUNK_TEXT_H_

#include <cstddef>
#include <string>
#include <utility>

namespace strata::internal {

class ChunkText {
 public:
  // The entries of chunk `chunk` (entries [begin, end) of the list) as they are inside the chunk's
  // array (no brackets), when the list's first `unchanged` entries are as last stored:
  // `append(from, end, first, &text)` appends entries [from, end) to text (`first` when none
  // precede them there), called for the entries after the kept ones, or for all of them. The
  // result is what a Stored() after this write keeps (the last chunk a write writes is the one
  // kept).
  template <typename AppendEntries>
  const std::string& Write(size_t chunk, size_t begin, size_t end, size_t unchanged,
                           const AppendEntries& append) {
    Kept next;
    next.chunk = chunk;
    if (chunk == stored_.chunk && stored_.entries > 0 && unchanged >= begin + stored_.entries &&
        end >= begin + stored_.entries) {
      next = stored_;
    }
    append(begin + next.entries, end, next.entries == 0, &next.text);
    encoded_ += end - begin - next.entries;
    next.entries = end - begin;
    pending_ = std::move(next);
    written_ = true;
    return pending_.text;
  }
  // A new write begins: until Write() is called, storing it keeps the chunk as stored.
  void Begin() { written_ = false; }
  // The last write was committed.
  void Stored() {
    if (written_) stored_ = std::move(pending_);
    pending_ = Kept();
    written_ = false;
  }
  // Nothing kept (the list was read back, or replaced): the next write encodes its chunk whole.
  void Reset() {
    stored_ = Kept();
    pending_ = Kept();
    written_ = false;
  }

  size_t kept_bytes() const { return stored_.text.capacity(); }
  // How many entries Write() has encoded (for tests).
  size_t encoded() const { return encoded_; }

 private:
  struct Kept {
    size_t chunk = 0;
    size_t entries = 0;  // 0: nothing kept
    std::string text;
  };
  Kept stored_;   // as stored
  Kept pending_;  // as the last write would store it
  bool written_ = false;
  size_t encoded_ = 0;
};

}  // namespace strata::internal

#endif  // STRATA_CORE_CHUNK_TEXT_H_
