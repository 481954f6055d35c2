#pragma once
// A file written at explicit offsets. Writes go to "<path>.partial", renamed to <path> by commit(); a
// sink destroyed before commit() removes the partial file, so a failed conversion leaves nothing behind
// and never clobbers an existing good file.
#include <cstdint>
#include <string>

namespace qt::formats {

class FileSink {
 public:
  explicit FileSink(const std::string& path);
  ~FileSink();
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;

  // Writes all `bytes` at `offset`; short writes are retried, errors (ENOSPC, EIO, ...) are a qt::Error.
  void write_at(uint64_t offset, const void* data, uint64_t bytes);
  // Checks the size is `expected_size`, closes and renames into place.
  void commit(uint64_t expected_size);

 private:
  [[noreturn]] void fail_errno(const std::string& what) const;
  std::string path_, tmp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace qt::formats
