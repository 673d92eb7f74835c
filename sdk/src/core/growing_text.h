// GrowingText: a text buffer that only appends (or cuts its end) and grows without copying what
// it holds once it is large (private to strata; any component that links strata::core may include
// it). From kMapFrom bytes of capacity on, its memory is pages mapped for it alone, at the start
// of a reservation of address space kReserveFactor times as large (at least kReserveAtLeast; no
// memory is committed to the rest until it is made writable). Growing within the reservation
// makes more of it writable: the pages held stay where they are. Growing past it moves the pages
// to a new reservation (Linux mremap): the kernel moves their page table entries, the bytes are
// neither copied nor faulted in again. A std::string grows by copying into fresh memory: a
// context's rendered history at 1M tokens (4-5 MB) copied and faulted in whole each time it grew.
// Moving the pages is not free either: on the virtual machines the benchmarks ran on, the first
// read of a 4 MB text after a move took milliseconds (docs/benchmarks.md, "Fresh memory in the
// turn at 1M"). The reservation makes a move happen once per fourfold growth instead of whenever
// the address space after the text was taken. Each mapped text is two mappings (its writable
// pages and the rest of its reservation).
// Below kMapFrom it is ordinary heap memory (malloc/realloc).
//
// Not thread-safe (one owner, as a std::string).
#ifndef STRATA_CORE_GROWING_TEXT_H_
#define STRATA_CORE_GROWING_TEXT_H_

#include <cstddef>
#include <string_view>

namespace strata::internal {

class GrowingText {
 public:
  // Capacities from here on are mapped pages.
  static constexpr size_t kMapFrom = size_t{256} << 10;
  // A mapped text reserves this many times its capacity of address space when it maps or moves...
  static constexpr size_t kReserveFactor = 4;
  // ...and at least this much.
  static constexpr size_t kReserveAtLeast = size_t{4} << 20;

  GrowingText() = default;
  ~GrowingText();
  GrowingText(const GrowingText& other);
  GrowingText& operator=(const GrowingText& other);
  GrowingText(GrowingText&& other) noexcept;
  GrowingText& operator=(GrowingText&& other) noexcept;
  void swap(GrowingText& other) noexcept;

  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }
  const char* data() const { return data_; }
  std::string_view view() const { return std::string_view(data_, size_); }

  // Room for at least `bytes` in all (a mapped capacity is rounded up to whole pages). Throws
  // std::bad_alloc when the memory cannot be had, as a std::string does.
  void reserve(size_t bytes);
  // Appends, growing by half again when full (reserve() first to choose the growth). `text`
  // must not view this buffer's own bytes (growing may move them).
  void append(std::string_view text);
  void push_back(char c) { append(std::string_view(&c, 1)); }
  // Cuts the text to its first `bytes` (`bytes` <= size()); the capacity stays.
  void truncate(size_t bytes);
  void clear() { size_ = 0; }

 private:
  void Release() noexcept;
  // Whether data_ is mapped pages (capacity_ of them) rather than heap memory: every capacity from
  // kMapFrom on is mapped, every smaller one is not.
  bool mapped() const { return capacity_ >= kMapFrom; }

  char* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;  // writable bytes at data_
  size_t reserved_ = 0;  // mapped: bytes of address space reserved at data_ (>= capacity_)
};

}  // namespace strata::internal

#endif  // STRATA_CORE_GROWING_TEXT_H_
