#include "core/growing_text.h"

#include <sys/mman.h>
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

TEST_CASE("a mapped growing text grows in place within its reservation and moves past it") {
  GrowingText text;
  text.reserve(GrowingText::kMapFrom);  // mapped from here on
  const void* const start = text.data();
  std::string expected;
  for (int i = 0; expected.size() < (size_t{2} << 20); ++i) {
    text.append(Chunk(i));
    expected += Chunk(i);
  }
  // From 256 KB to 2 MB, grown by half again each time it was full: never moved.
  CHECK(static_cast<const void*>(text.data()) == start);
  CHECK(text.view() == expected);
  // The address space after its capacity is its reservation's: nothing else can be mapped there.
  void* const after = const_cast<char*>(text.data()) + text.capacity();
  void* const other =
      mmap(after, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  CHECK(other == MAP_FAILED);
  if (other != MAP_FAILED) munmap(other, 4096);
  // Past the reservation (at least 4 MB, four times the capacity when it was mapped): the pages
  // move to a new reservation without being copied or faulted in again.
  const long before = MinorFaults();
  text.reserve(size_t{64} << 20);
  CHECK(MinorFaults() - before < 8);
  CHECK(text.view() == expected);
  const void* const moved = text.data();
  text.append(std::string(size_t{32} << 20, 'y'));  // within the new reservation: in place
  CHECK(static_cast<const void*>(text.data()) == moved);
  CHECK(text.view().substr(0, expected.size()) == expected);
  CHECK(text.size() == expected.size() + (size_t{32} << 20));
}

// A kernel whose mremap moves only one mapping at a time has the text copied to its new
// reservation instead (growing_text.cc); one that moves several (as the one this was written on)
// moves them all. Either way the text keeps its bytes.
TEST_CASE("a mapped growing text whose pages are two mappings keeps its bytes when it moves") {
  GrowingText text;
  std::string expected;
  for (int i = 0; expected.size() < (size_t{1} << 20); ++i) {
    text.append(Chunk(i));
    expected += Chunk(i);
  }
  // Its first page marked apart (not copied into a forked child) makes its writable pages two
  // mappings.
  REQUIRE(madvise(const_cast<char*>(text.data()), 4096, MADV_DONTFORK) == 0);
  text.reserve(size_t{64} << 20);  // past its reservation
  CHECK(text.view() == expected);
  text.append("after the move");
  CHECK(text.view() == expected + "after the move");
}

}  // namespace
}  // namespace strata::internal
