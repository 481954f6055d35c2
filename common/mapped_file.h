#pragma once
// Read-only memory map of a whole file. Model files are mapped, never read into memory, so a 16 GB model
// costs page cache, not heap. Every reader must bounds-check against size() itself: the map gives no
// protection beyond the file's end.
#include <cstddef>
#include <cstdint>
#include <string>

namespace qt {

class MappedFile {
 public:
  MappedFile() = default;
  // Throws qt::Error naming the path if the file cannot be opened or mapped. An empty file maps to
  // data() == nullptr, size() == 0.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Hint the kernel that the mapping will be read sequentially / is no longer needed (streaming converters).
  void advise_sequential() const;
  void release_pages(uint64_t offset, uint64_t length) const;

 private:
  void reset() noexcept;
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

// If [p, p + bytes) lies inside a live MappedFile, unmaps its whole pages from this process and returns true;
// otherwise does nothing and returns false. The mapping is read-only, so its pages are never private copies:
// a later read maps them again from the page cache (or the file), with the same contents. They stay in the
// page cache, so the next process that maps the file does not read it from disk again.
bool release_mapped_pages(const void* p, uint64_t bytes);

}  // namespace qt
