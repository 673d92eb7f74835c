// ChunkText: a chunked list's last chunk, written on from its text as stored.
#include "core/chunk_text.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace strata::internal {
namespace {

// A list of numbers whose chunks are "n,n,...": the whole chunk as a writer that kept nothing
// writes it, and the writes of `text`.
struct List {
  std::vector<int> items;
  size_t stored = 0;  // the leading items the store holds as they are here

  void Append(int n) { items.push_back(n); }
  std::string Whole(size_t begin, size_t end) const {
    std::string out;
    for (size_t i = begin; i < end; ++i) out += (i > begin ? "," : "") + std::to_string(items[i]);
    return out;
  }
  // The last chunk (of `per` items) as `text` writes it.
  std::string Write(ChunkText& text, size_t per) const {
    const size_t chunk = (items.size() - 1) / per;
    const size_t begin = chunk * per;
    text.Begin();
    return text.Write(chunk, begin, items.size(), stored,
                      [this](size_t from, size_t to, bool first, std::string* out) {
                        for (size_t i = from; i < to; ++i) {
                          if (i > from || !first) out->push_back(',');
                          *out += std::to_string(items[i]);
                        }
                      });
  }
};

TEST_CASE("a chunk's kept text continues only from what was stored and is unchanged") {
  constexpr size_t kPer = 8;
  ChunkText text;
  List list;
  for (int i = 0; i < 5; ++i) list.Append(i);
  CHECK(list.Write(text, kPer) == list.Whole(0, 5));
  CHECK(text.encoded() == 5);
  text.Stored();
  list.stored = 5;
  CHECK(text.kept_bytes() > 0);
  // Appended: the two new items only.
  list.Append(5);
  list.Append(6);
  CHECK(list.Write(text, kPer) == list.Whole(0, 7));
  CHECK(text.encoded() == 7);
  // Not stored, and a write that writes no chunk is stored: the text kept is still the five.
  text.Begin();
  text.Stored();
  CHECK(list.Write(text, kPer) == list.Whole(0, 7));
  CHECK(text.encoded() == 9);
  text.Stored();
  list.stored = 7;
  // An item the store holds changed (stored falls to 3): the chunk is written whole.
  list.items[3] = 33;
  list.stored = 3;
  CHECK(list.Write(text, kPer) == list.Whole(0, 7));
  CHECK(text.encoded() == 16);
  text.Stored();
  list.stored = 7;
  // Into the next chunk: a chunk the kept text is not of is written whole.
  list.Append(7);
  list.Append(8);
  CHECK(list.Write(text, kPer) == list.Whole(8, 9));
  CHECK(text.encoded() == 17);
  text.Stored();
  list.stored = 9;
  // Reset: nothing kept.
  text.Reset();
  list.Append(9);
  CHECK(list.Write(text, kPer) == list.Whole(8, 10));
  CHECK(text.encoded() == 19);
}

}  // namespace
}  // namespace strata::internal
