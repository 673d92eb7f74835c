#include "core/large_block.h"

#include <catch2/catch.hpp>
#include <cstddef>
#include <new>

#include "strata/context.h"
#include "testing/context_testing.h"
#include "testing/skip.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace strata {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizerAllocator = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitizerAllocator = true;
#else
constexpr bool kSanitizerAllocator = false;
#endif
#else
constexpr bool kSanitizerAllocator = false;
#endif

// The bytes glibc's malloc holds in blocks mapped for them alone.
size_t MappedBlockBytes() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
  return mallinfo2().hblkhd;
#else
  return 0;
#endif
}

void RequireGlibcAllocator() {
#if !defined(__GLIBC__) || (__GLIBC__ == 2 && __GLIBC_MINOR__ < 33)
  STRATA_SKIP("the allocator is not glibc's malloc 2.33 or later (mallinfo2): nothing to observe");
#endif
  if (kSanitizerAllocator) STRATA_SKIP("a sanitizer's allocator replaces glibc's malloc");
}

// Whether a block of `bytes`, allocated now and held while checked, is mapped for it alone.
bool AllocatedMapped(size_t bytes) {
  const size_t before = MappedBlockBytes();
  void* block = ::operator new(bytes);
  const bool mapped = MappedBlockBytes() >= before + bytes;
  ::operator delete(block);
  return mapped;
}

TEST_CASE("a large block prepared for comes from the heap instead of a mapping of its own",
          "[core]") {
  RequireGlibcAllocator();
  // Larger than any block this process allocated before: mapped afresh.
  CHECK(AllocatedMapped(size_t{12} << 20));
  // Freed, it raised the threshold to its size: a block of that size now comes from the heap.
  CHECK_FALSE(AllocatedMapped(size_t{12} << 20));
  const size_t prepared = internal::LargeBlocksPrepared();
  internal::PrepareLargeBlock(size_t{20} << 20);
  CHECK(internal::LargeBlocksPrepared() == prepared + 1);
  CHECK_FALSE(AllocatedMapped(size_t{20} << 20));
  // Not larger than the largest prepared, or outside the sizes glibc maps and raises its
  // threshold to: nothing is allocated.
  internal::PrepareLargeBlock(size_t{16} << 20);
  internal::PrepareLargeBlock(internal::kLargeBlockFrom - 1);
  internal::PrepareLargeBlock(internal::kLargeBlockUpTo + 1);
  CHECK(internal::LargeBlocksPrepared() == prepared + 1);
  // A block larger than the one prepared is mapped again.
  CHECK(AllocatedMapped(size_t{28} << 20));
}

TEST_CASE("a request body larger than any before is not mapped afresh", "[core][context]") {
  RequireGlibcAllocator();
  ContextOptions options;
  options.hygiene.max_segment_tokens = 0;  // the tool result is kept whole
  auto context = testing::NewContext(options);
  REQUIRE(context->AppendUser("Read the logs.").ok());
  for (int i = 0; i < 3; ++i) {
    const std::string id = "call_" + std::to_string(i);
    REQUIRE(context->AppendAssistant({"", "", {{id, "read", "{}"}}}).ok());
    // Each result (distinct: not deduplicated) is a block of 2 MB, freed after the append: it
    // raises glibc's threshold to 2 MB.
    REQUIRE(context
                ->AppendToolResult(
                    {id, std::string(size_t{2} << 20, static_cast<char>('a' + i)), false})
                .ok());
  }
  const size_t before = MappedBlockBytes();
  const BuiltRequest built = testing::MustBuild(*context);
  REQUIRE(built.body.size() > (size_t{6} << 20));
  // The body (over 6 MB, above the threshold) holds no mapping of its own.
  CHECK(MappedBlockBytes() < before + built.body.size());
}

}  // namespace
}  // namespace strata
