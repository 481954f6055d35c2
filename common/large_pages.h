#pragma once
// Owning memory for the big arrays that decode streams end to end on every step: the repacked weights. A
// buffer of at least 2 MiB is mapped on a 2 MiB boundary and advised for transparent huge pages, so that
// streaming it takes one TLB entry per 2 MiB instead of one per 4 KiB; under a hypervisor each TLB miss walks
// two page tables, which costs a bandwidth-bound matvec several percent. Where the kernel gives no huge
// pages (THP off, or no free 2 MiB frame), the memory is ordinary 4 KiB pages and nothing else changes.
// Smaller buffers come from the heap: rounding them up to 2 MiB would cost more memory than it saves time.
#include <cstddef>
#include <cstdint>

namespace qt {

class LargePageBuffer {
 public:
  LargePageBuffer() = default;
  // `bytes` of memory, zero-filled. Throws qt::Error if the memory cannot be had.
  explicit LargePageBuffer(size_t bytes);
  ~LargePageBuffer();
  LargePageBuffer(LargePageBuffer&& other) noexcept;
  LargePageBuffer& operator=(LargePageBuffer&& other) noexcept;
  LargePageBuffer(const LargePageBuffer&) = delete;
  LargePageBuffer& operator=(const LargePageBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Whether the buffer was mapped for huge pages (the kernel may still back it with 4 KiB pages).
  bool advised_huge() const { return mapped_; }

  static constexpr size_t kHugePage = size_t(2) << 20;
  static constexpr size_t kAlign = 64;  // every buffer starts on a cache line

 private:
  void reset() noexcept;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;  // mapped (munmap frees it) rather than taken from the heap (free)
};

}  // namespace qt
