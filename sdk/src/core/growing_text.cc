#include "core/growing_text.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace strata::internal {

namespace {

size_t PageSize() {
  static const size_t page = [] {
    const long size = sysconf(_SC_PAGESIZE);
    return size > 0 ? static_cast<size_t>(size) : size_t{4096};
  }();
  return page;
}

size_t RoundToPages(size_t bytes) {
  const size_t page = PageSize();
  return (bytes + page - 1) / page * page;
}

}  // namespace

GrowingText::~GrowingText() { Release(); }

void GrowingText::Release() noexcept {
  if (data_ == nullptr) return;
  if (mapped()) {
    munmap(data_, reserved_);
  } else {
    std::free(data_);
  }
  data_ = nullptr;
  size_ = capacity_ = reserved_ = 0;
}

GrowingText::GrowingText(const GrowingText& other) {
  reserve(other.size_);
  if (other.size_ > 0) std::memcpy(data_, other.data_, other.size_);
  size_ = other.size_;
}

GrowingText& GrowingText::operator=(const GrowingText& other) {
  if (this == &other) return *this;
  if (other.size_ > capacity_) Release();  // what this held is not copied into the new memory
  reserve(other.size_);
  if (other.size_ > 0) std::memcpy(data_, other.data_, other.size_);
  size_ = other.size_;
  return *this;
}

GrowingText::GrowingText(GrowingText&& other) noexcept { swap(other); }

GrowingText& GrowingText::operator=(GrowingText&& other) noexcept {
  if (this != &other) {
    Release();
    swap(other);
  }
  return *this;
}

void GrowingText::swap(GrowingText& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(size_, other.size_);
  std::swap(capacity_, other.capacity_);
  std::swap(reserved_, other.reserved_);
}

void GrowingText::reserve(size_t bytes) {
  if (bytes <= capacity_) return;
  if (bytes < kMapFrom) {  // heap memory (not mapped: a mapped capacity is >= kMapFrom)
    void* grown = std::realloc(data_, bytes);
    if (grown == nullptr) throw std::bad_alloc();
    data_ = static_cast<char*>(grown);
    capacity_ = bytes;
    return;
  }
  const size_t pages = RoundToPages(bytes);
  if (mapped() && pages <= reserved_) {  // within the reservation: in place
    if (mprotect(data_ + capacity_, pages - capacity_, PROT_READ | PROT_WRITE) != 0) {
      throw std::bad_alloc();
    }
    capacity_ = pages;
    return;
  }
  // A new reservation: address space only (no memory is committed to it until it is made
  // writable), the text's pages moved to its start.
  const size_t reserved = RoundToPages(std::max(kReserveFactor * pages, kReserveAtLeast));
  void* fresh =
      mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (fresh == MAP_FAILED) throw std::bad_alloc();
  char* const to = static_cast<char*>(fresh);
  const size_t kept = mapped() ? capacity_ : 0;  // bytes of pages moved, already writable
  if (mprotect(to + kept, pages - kept, PROT_READ | PROT_WRITE) != 0) {
    munmap(fresh, reserved);
    throw std::bad_alloc();
  }
  if (mapped()) {
    // The kernel moves the page table entries onto the new reservation's start (replacing what
    // was reserved there); the old reservation's rest is let go. A kernel that cannot move them
    // (the writable pages not one mapping) gets a copy instead.
    if (mremap(data_, capacity_, capacity_, MREMAP_MAYMOVE | MREMAP_FIXED, to) != MAP_FAILED) {
      if (reserved_ > capacity_) munmap(data_ + capacity_, reserved_ - capacity_);
    } else if (mprotect(to, kept, PROT_READ | PROT_WRITE) == 0) {
      if (size_ > 0) std::memcpy(to, data_, size_);
      munmap(data_, reserved_);
    } else {
      munmap(fresh, reserved);
      throw std::bad_alloc();
    }
  } else {
    if (size_ > 0) std::memcpy(to, data_, size_);  // the one copy, of less than kMapFrom
    std::free(data_);
  }
  data_ = to;
  capacity_ = pages;
  reserved_ = reserved;
}

void GrowingText::append(std::string_view text) {
  if (text.empty()) return;
  if (size_ + text.size() > capacity_) reserve(size_ + text.size() + (size_ + text.size()) / 2);
  std::memcpy(data_ + size_, text.data(), text.size());
  size_ += text.size();
}

void GrowingText::truncate(size_t bytes) {
  if (bytes < size_) size_ = bytes;
}

}  // namespace strata::internal
