#include "common/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "common/error.h"

namespace qt {
namespace {

// The live mappings, begin -> end, so release_mapped_pages() can tell a file's pages from anonymous memory
// (where dropping pages would lose their contents).
std::mutex g_mappings_mutex;
std::map<uintptr_t, uintptr_t>& mappings() {
  static std::map<uintptr_t, uintptr_t> m;
  return m;
}

}  // namespace

bool release_mapped_pages(const void* p, uint64_t bytes) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p), end = begin + bytes;
  {
    std::lock_guard<std::mutex> lock(g_mappings_mutex);
    auto it = mappings().upper_bound(begin);
    if (it == mappings().begin()) return false;
    --it;
    if (end > it->second) return false;
  }
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
  return true;
}

MappedFile::MappedFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: a FIFO without a writer would block the open forever; the check below refuses it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail_file(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail_file(path, std::string("cannot stat: ") + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail_file(path, "not a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      fail_file(path, std::string("cannot map: ") + std::strerror(err));
    }
    data_ = static_cast<const uint8_t*>(p);
    std::lock_guard<std::mutex> lock(g_mappings_mutex);
    mappings()[reinterpret_cast<uintptr_t>(p)] = reinterpret_cast<uintptr_t>(p) + size_;
  }
  ::close(fd);
}

MappedFile::~MappedFile() { reset(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::reset() noexcept {
  if (data_) {
    {
      std::lock_guard<std::mutex> lock(g_mappings_mutex);
      mappings().erase(reinterpret_cast<uintptr_t>(data_));
    }
    ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  data_ = nullptr;
  size_ = 0;
}

void MappedFile::advise_sequential() const {
  if (data_) ::madvise(const_cast<uint8_t*>(data_), size_, MADV_SEQUENTIAL);
}

void MappedFile::release_pages(uint64_t offset, uint64_t length) const {
  if (!data_ || offset >= size_) return;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  uint64_t begin = offset / page * page;
  uint64_t end = std::min(size_, offset + length);
  if (end > begin) ::madvise(const_cast<uint8_t*>(data_) + begin, end - begin, MADV_DONTNEED);
}

}  // namespace qt
