#include "common/large_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "common/error.h"

namespace qt {

LargePageBuffer::LargePageBuffer(size_t bytes) : size_(bytes) {
  if (bytes < kHugePage) {
    // Zeroed like the mapped case, so callers see the same contents whichever way the memory came; 64-byte
    // aligned, as vector loads of a row want.
    const size_t padded = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
    data_ = static_cast<uint8_t*>(std::aligned_alloc(kAlign, padded));
    if (!data_) throw Error("out of memory: " + std::to_string(bytes) + " bytes for a buffer");
    std::memset(data_, 0, padded);
    return;
  }
  // Map one huge page more than needed and trim both ends, so the buffer starts on a 2 MiB boundary. The
  // end is rounded to a small page only: the kernel gives huge pages to whole 2 MiB ranges inside the
  // mapping, so the tail stays in 4 KiB pages and the buffer never costs more memory than its size.
  const size_t small_page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t rounded = (bytes + small_page - 1) / small_page * small_page;
  const size_t over = rounded + kHugePage;
  void* p = ::mmap(nullptr, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw Error("out of memory: cannot map " + std::to_string(bytes) + " bytes (" +
                std::strerror(errno) + ")");
  const auto base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (base + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > base) ::munmap(p, aligned - base);
  const uintptr_t end = base + over, keep_end = aligned + rounded;
  if (end > keep_end) ::munmap(reinterpret_cast<void*>(keep_end), end - keep_end);
#ifdef MADV_HUGEPAGE
  // Advice only: with THP off it fails, and the pages are 4 KiB ones.
  ::madvise(reinterpret_cast<void*>(aligned), rounded, MADV_HUGEPAGE);
#endif
  data_ = reinterpret_cast<uint8_t*>(aligned);
  mapped_ = true;
}

LargePageBuffer::~LargePageBuffer() { reset(); }

LargePageBuffer::LargePageBuffer(LargePageBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, false)) {}

LargePageBuffer& LargePageBuffer::operator=(LargePageBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, false);
  }
  return *this;
}

void LargePageBuffer::reset() noexcept {
  if (mapped_) {
    ::munmap(data_, size_);  // munmap takes every page the range touches, so the rounded tail goes too
  } else {
    std::free(data_);
  }
  data_ = nullptr, size_ = 0, mapped_ = false;
}

}  // namespace qt
