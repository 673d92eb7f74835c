// Large blocks that the allocator serves from memory it keeps (private to strata; any component
// that links strata::core may include it).
//
// glibc's malloc serves a block above its mmap threshold (128 KB at first) with pages mapped for
// it alone, every one of which faults in when first written, and unmaps them when the block is
// freed; freeing such a block raises the threshold to its size (up to 32 MB), so that later blocks
// of that size come from the heap, whose freed memory the next block reuses. A request body that
// grows past every size the process allocated before is therefore mapped afresh once at each new
// size, all of its pages faulted in (a 4.5 MB body: about 1,100 faults), and only the bodies after
// it reuse memory. PrepareLargeBlock(bytes), called before allocating such a block, allocates and
// frees one of that size untouched the first time the process asks for that size or more: the
// mapping costs two system calls and no fault (nothing is written to it), and the block itself then
// comes from the heap, where it faults in only what the heap did not already hold (the growth since
// the previous body). With another allocator, or with glibc's threshold fixed by the application
// (M_MMAP_THRESHOLD), the extra block is allocated and freed and nothing else changes.
#ifndef STRATA_CORE_LARGE_BLOCK_H_
#define STRATA_CORE_LARGE_BLOCK_H_

#include <cstddef>

namespace strata::internal {

// Blocks from this size on are prepared: glibc's initial mmap threshold (128 KB).
inline constexpr size_t kLargeBlockFrom = size_t{128} << 10;
// Nor above this one: glibc raises its threshold no further (32 MB on 64-bit systems).
inline constexpr size_t kLargeBlockUpTo = size_t{32} << 20;

// Prepares the allocator for a block of `bytes` as above, once per new largest size in the process
// (a call for a size no larger than one prepared before returns at once). Thread-safe.
void PrepareLargeBlock(size_t bytes);

// How many blocks PrepareLargeBlock allocated and freed in this process (for tests).
size_t LargeBlocksPrepared();

}  // namespace strata::internal

#endif  // STRATA_CORE_LARGE_BLOCK_H_
