#include "core/large_block.h"

#include <atomic>
#include <new>

namespace strata::internal {
namespace {

std::atomic<size_t> largest_prepared{0};
std::atomic<size_t> blocks_prepared{0};
// The block is stored here before it is freed, so that the compiler cannot leave out the
// allocation and the free as unused.
void* volatile last_block = nullptr;

}  // namespace

void PrepareLargeBlock(size_t bytes) {
  if (bytes < kLargeBlockFrom || bytes > kLargeBlockUpTo) return;
  size_t largest = largest_prepared.load(std::memory_order_relaxed);
  do {
    if (bytes <= largest) return;
  } while (!largest_prepared.compare_exchange_weak(largest, bytes, std::memory_order_relaxed));
  // Called directly (not a new-expression), operator new cannot be left out. Nothing is written
  // to the block: its pages are never faulted in.
  void* block = ::operator new(bytes, std::nothrow);
  if (block == nullptr) return;
  last_block = block;
  ::operator delete(block);
  last_block = nullptr;
  blocks_prepared.fetch_add(1, std::memory_order_relaxed);
}

size_t LargeBlocksPrepared() { return blocks_prepared.load(std::memory_order_relaxed); }

}  // namespace strata::internal
