#include "models/formats/file_sink.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <vector>

#include "common/error.h"

namespace qt::formats {
namespace {

// Partial files a signal must remove: fixed storage, because the handler may only use async-signal-safe
// calls (unlink, signal, raise) and must not allocate.
constexpr int kSlots = 8;
char g_partial_paths[kSlots][4096];
std::atomic<int> g_partial_used[kSlots];
std::mutex g_slots_mutex;

extern "C" void remove_partials_and_die(int sig) {
  for (int i = 0; i < kSlots; ++i)
    if (g_partial_used[i].load()) ::unlink(g_partial_paths[i]);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// Every signal whose default action ends the process and that a handler can catch: a terminal hanging up,
// a closed pipe, a file-size limit (SIGXFSZ) or a crash must not leave a partial file behind either.
std::vector<int> terminating_signals() {
  std::vector<int> sigs = {SIGHUP,  SIGINT,  SIGQUIT, SIGILL,    SIGTRAP, SIGABRT, SIGBUS, SIGFPE,
                           SIGUSR1, SIGSEGV, SIGUSR2, SIGPIPE,   SIGALRM, SIGTERM, SIGXCPU, SIGXFSZ,
                           SIGVTALRM, SIGPROF, SIGIO, SIGPWR, SIGSYS, SIGSTKFLT};
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) sigs.push_back(sig);
  return sigs;
}

void install_signal_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : terminating_signals()) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;  // the program's own
      struct sigaction sa {};
      sa.sa_handler = remove_partials_and_die;
      sigfillset(&sa.sa_mask);  // one handler at a time: a second signal waits until the files are gone
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

int register_partial(const std::string& path) {
  if (path.size() >= sizeof(g_partial_paths[0])) return -1;
  install_signal_handlers();
  std::lock_guard<std::mutex> lock(g_slots_mutex);
  for (int i = 0; i < kSlots; ++i) {
    if (g_partial_used[i].load()) continue;
    std::memcpy(g_partial_paths[i], path.c_str(), path.size() + 1);
    g_partial_used[i].store(1);
    return i;
  }
  return -1;
}

void unregister_partial(int slot) {
  if (slot < 0) return;
  std::lock_guard<std::mutex> lock(g_slots_mutex);
  g_partial_used[slot].store(0);
}

const char* file_kind(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The checks the header comment promises, each a one-line error naming the path.
void check_output(const std::string& path, uint64_t expected_size) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      throw Error(path + ": exists and is " + file_kind(st.st_mode) +
                  "; only a regular file is replaced (remove it or choose another output path)");
  } else if (errno != ENOENT) {
    throw Error(path + ": cannot check the output path: " + std::strerror(errno), kExitFailure);
  }
  std::string parent = std::filesystem::path(path).parent_path().string();
  if (parent.empty()) parent = ".";
  if (::stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error(path + ": the folder " + parent + " does not exist (no folder is created for the output)");
  struct statvfs fs {};
  if (::statvfs(parent.c_str(), &fs) == 0) {
    // Saturating: f_bavail * f_frsize can pass 2^64 on a very large file system.
    const uint64_t frsize = fs.f_frsize ? fs.f_frsize : 1;
    const uint64_t free_bytes = fs.f_bavail > UINT64_MAX / frsize ? UINT64_MAX : fs.f_bavail * frsize;
    if (free_bytes < expected_size)
      throw Error(path + ": the file needs " + std::to_string(expected_size) + " bytes but " + parent + " has " +
                      std::to_string(free_bytes) + " bytes free",
                  kExitFailure);
  }
}

}  // namespace

FileSink::FileSink(const std::string& path, uint64_t expected_size) : path_(path), tmp_path_(path + ".partial") {
  check_output(path, expected_size);
  // Known to the signal handler before it exists: a signal that arrives as the file appears still removes it.
  signal_slot_ = register_partial(tmp_path_);
  // O_NOFOLLOW / O_NONBLOCK: a symlink or FIFO planted at the partial path fails instead of being written
  // through (or blocking); anything else that is not a regular file is refused after opening.
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  struct stat st {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    unregister_partial(signal_slot_);
    signal_slot_ = -1;
    committed_ = true;  // not ours to remove
    if (fd_ < 0) {
      errno = err;
      fail_errno("cannot create");
    }
    ::close(fd_);
    fd_ = -1;
    throw Error(tmp_path_ + ": exists and is not a regular file; remove it");
  }
}

FileSink::~FileSink() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_path_.c_str());
  unregister_partial(signal_slot_);
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
  // The output may have been replaced by a device, FIFO or link while this sink was writing.
  struct stat out {};
  if (::lstat(path_.c_str(), &out) == 0 && !S_ISREG(out.st_mode))
    throw Error(path_ + ": became " + std::string(file_kind(out.st_mode)) + " while writing; not replaced");
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) fail_errno("cannot rename to " + path_);
  committed_ = true;
  unregister_partial(signal_slot_);
  signal_slot_ = -1;
}

}  // namespace qt::formats
