#pragma once
// A file written at explicit offsets. Writes go to "<path>.partial", renamed to <path> by commit(); a
// sink destroyed before commit() removes the partial file, so a failed conversion leaves nothing behind
// and never clobbers an existing good file. Every catchable signal that ends the process (SIGINT, SIGTERM,
// SIGHUP, SIGPIPE, SIGXFSZ, a crash, ...; those the program has not taken over) also removes the partial
// files of live sinks before the process dies of it.
//
// Before anything is written the sink checks its output: `path` must be a regular file or not exist (a
// device, FIFO, symlink or folder is never replaced), its folder must exist (none is created), and the
// folder's file system must have `expected_size` bytes free.
#include <cstdint>
#include <string>

namespace qt::formats {

class FileSink {
 public:
  FileSink(const std::string& path, uint64_t expected_size);
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
  int signal_slot_ = -1;  // the partial file's slot in the signal handler's list
  bool committed_ = false;
};

}  // namespace qt::formats
