#include "models/formats/file_sink.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/error.h"

namespace qt::formats {

FileSink::FileSink(const std::string& path) : path_(path), tmp_path_(path + ".partial") {
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail_errno("cannot create");
}

FileSink::~FileSink() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_path_.c_str());
}

void FileSink::fail_errno(const std::string& what) const {
  const int err = errno;
  // Writing is not the input's fault: a full disk is a runtime failure.
  throw Error(tmp_path_ + ": " + what + ": " + std::strerror(err), kExitFailure);
}

void FileSink::write_at(uint64_t offset, const void* data, uint64_t bytes) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  while (bytes > 0) {
    const size_t chunk = static_cast<size_t>(bytes < (1ull << 30) ? bytes : (1ull << 30));
    const ssize_t n = ::pwrite(fd_, p, chunk, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno("write of " + std::to_string(chunk) + " bytes at offset " + std::to_string(offset) + " failed");
    }
    if (n == 0) {
      errno = ENOSPC;
      fail_errno("write made no progress at offset " + std::to_string(offset));
    }
    p += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<uint64_t>(n);
  }
}

void FileSink::commit(uint64_t expected_size) {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail_errno("cannot stat");
  if (static_cast<uint64_t>(st.st_size) != expected_size) {
    throw Error(tmp_path_ + ": internal: wrote " + std::to_string(st.st_size) + " bytes, layout says " +
                    std::to_string(expected_size), kExitFailure);
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail_errno("close failed");
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) fail_errno("cannot rename to " + path_);
  committed_ = true;
}

}  // namespace qt::formats
