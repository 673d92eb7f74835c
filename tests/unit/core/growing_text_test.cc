#include "core/growing_text.h"

#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <string>
#include <utility>

namespace strata::internal {
namespace {

// Minor page faults of this process so far.
long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// A chunk of text that differs from chunk to chunk.
std::string Chunk(int i) {
  return "{\"role\":\"tool\",\"content\":\"line " + std::to_string(i) + " of the output\\n\"},";
}

TEST_CASE("a growing text holds what was appended across heap memory and mapped pages") {
  GrowingText text;
  std::string expected;
  CHECK(text.empty());
  for (int i = 0; expected.size() < 3 * GrowingText::kMapFrom; ++i) {
    text.append(Chunk(i));
    expected += Chunk(i);
    if (i % 997 == 0) {  // grown by a quarter at a time, as the context's history is
      text.reserve(text.size() + text.size() / 4 + 4096);
      expected.reserve(expected.size() + expected.size() / 4 + 4096);
    }
    REQUIRE(text.size() == expected.size());
  }
  CHECK(text.view() == expected);
  CHECK(text.capacity() >= text.size());
  CHECK(text.capacity() % 4096 == 0);  // mapped: whole pages
  // Cut, then appended to: it continues from the cut.
  text.truncate(1000);
  text.push_back(',');
  text.append("tail");
  CHECK(text.view() == expected.substr(0, 1000) + ",tail");
  text.truncate(5000);  // longer than it is: nothing changes
  CHECK(text.size() == 1005);
  text.clear();
  CHECK(text.empty());
  text.append("again");
  CHECK(text.view() == "again");
}

TEST_CASE("a growing text copies, assigns, moves and swaps as a string does") {
  GrowingText small;
  small.append("small text");
  GrowingText large;
  std::string expected;
  for (int i = 0; expected.size() < 2 * GrowingText::kMapFrom; ++i) {
    large.append(Chunk(i));
    expected += Chunk(i);
  }
  GrowingText copy(large);
  CHECK(copy.view() == expected);
  CHECK(large.view() == expected);
  copy.append("more");
  CHECK(large.view() == expected);  // the copy has memory of its own
  GrowingText assigned;
  assigned.append("was here");
  assigned = large;  // heap memory replaced by pages
  CHECK(assigned.view() == expected);
  assigned = small;  // pages reused for less
  CHECK(assigned.view() == "small text");
  assigned = assigned;  // NOLINT: self-assignment keeps the text
  CHECK(assigned.view() == "small text");
  GrowingText moved(std::move(copy));
  CHECK(moved.view() == expected + "more");
  CHECK(copy.empty());  // NOLINT: a moved-from text is empty
  moved.swap(assigned);
  CHECK(moved.view() == "small text");
  CHECK(assigned.view() == expected + "more");
  assigned = std::move(moved);
  CHECK(assigned.view() == "small text");
}

TEST_CASE("a mapped growing text grows without touching the pages it holds") {
  GrowingText text;
  const std::string chunk(1 << 20, 'x');
  for (int i = 0; i < 32; ++i) text.append(chunk);  // 32 MB written: its pages are faulted in
  REQUIRE(text.size() == size_t{32} << 20);
  text.reserve(text.size() + text.size() / 4);
  const long before = MinorFaults();
  // Growing by 8 MB more: a copy into fresh memory would fault in the 32 MB it holds (8,192 pages
  // of 4 KB, or 16 huge pages of 2 MB); remapping touches none of them.
  text.reserve(size_t{48} << 20);
  const long faults = MinorFaults() - before;
  CHECK(faults < 8);
  CHECK(text.view().substr(0, chunk.size()) == chunk);
  CHECK(text.view().substr(text.size() - chunk.size()) == chunk);
}

}  // namespace
}  // namespace strata::internal
