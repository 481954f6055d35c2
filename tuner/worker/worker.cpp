#include "tuner/worker/worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>

#include "common/error.h"

namespace qt::tune {

namespace {

bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

bool write_frame(int fd, const std::string& s) {
  uint8_t len[4] = {uint8_t(s.size()), uint8_t(s.size() >> 8), uint8_t(s.size() >> 16), uint8_t(s.size() >> 24)};
  return write_all(fd, len, 4) && write_all(fd, s.data(), s.size());
}

// Reads exactly n bytes, waiting at most until `deadline` (steady clock, seconds; <0 = forever).
// Returns 1 on success, 0 on EOF/error, -1 on timeout.
int read_exact(int fd, char* p, size_t n, double deadline) {
  using clock = std::chrono::steady_clock;
  while (n > 0) {
    int wait_ms = -1;
    if (deadline >= 0) {
      double now = std::chrono::duration<double>(clock::now().time_since_epoch()).count();
      if (now >= deadline) return -1;
      // Poll in slices of at most an hour: a huge --timeout must not overflow the int poll() takes.
      wait_ms = int(std::min((deadline - now) * 1000.0, 3.6e6)) + 1;
    }
    pollfd pfd{fd, POLLIN, 0};
    int pr = ::poll(&pfd, 1, wait_ms);
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) continue;  // a slice ran out: the deadline check above decides
    if (pr < 0) return 0;
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    p += r;
    n -= size_t(r);
  }
  return 1;
}

int read_frame(int fd, std::string& out, double deadline) {
  char len[4];
  int r = read_exact(fd, len, 4, deadline);
  if (r != 1) return r;
  uint32_t n = uint32_t(uint8_t(len[0])) | uint32_t(uint8_t(len[1])) << 8 | uint32_t(uint8_t(len[2])) << 16 |
               uint32_t(uint8_t(len[3])) << 24;
  if (n > (1u << 30)) return 0;
  out.assign(n, '\0');
  return n ? read_exact(fd, out.data(), n, deadline) : 1;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    default: return "a signal";
  }
}

WorkerCommand self_command(const std::vector<std::string>& args) {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot find this program's path (/proc/self/exe): " + ec.message(), kExitFailure);
  WorkerCommand c{exe.string()};
  c.insert(c.end(), args.begin(), args.end());
  return c;
}

Worker::Worker(WorkerCommand command) : command_(std::move(command)) {
  if (command_.empty()) throw Error("a worker needs a program to run", kExitFailure);
  // A dead worker must show up as EOF / EPIPE, not kill the tuner with SIGPIPE.
  ::signal(SIGPIPE, SIG_IGN);
}

Worker::~Worker() {
  if (pid_ > 0) {
    WorkerReply ignored;
    reap(true, ignored);
  }
}

std::string Worker::finish() {
  WorkerReply r;
  reap(false, r);
  return r.reason;
}

void Worker::spawn() {
  int down[2], up[2], status[2];
  if (::pipe2(down, O_CLOEXEC) != 0 || ::pipe2(up, O_CLOEXEC) != 0 || ::pipe2(status, O_CLOEXEC) != 0)
    throw Error(std::string("cannot create worker pipes: ") + std::strerror(errno), kExitFailure);
  // Everything the child needs is built before fork(): between fork and exec only async-signal-safe calls
  // are allowed, since other threads of the tuner (NVRTC compiling ahead) may hold the allocator's locks.
  std::vector<char*> argv;
  for (std::string& a : command_) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(std::string("cannot fork a worker: ") + std::strerror(errno), kExitFailure);
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the tuner (kept across exec)
    if (::getppid() != parent) ::_exit(0);
    // fds 3 and 4 are the request and reply pipes; dup2 clears close-on-exec on the copies. The ends are
    // moved clear of 3 and 4 first, so that no dup2 overwrites an end still to be copied.
    int in = ::fcntl(down[0], F_DUPFD_CLOEXEC, 10), out = ::fcntl(up[1], F_DUPFD_CLOEXEC, 10);
    if (in < 0 || out < 0 || ::dup2(in, 3) < 0 || ::dup2(out, 4) < 0 || ::dup2(2, 1) < 0) {
      const int e = errno;
      (void)!::write(status[1], &e, sizeof e);
      ::_exit(127);
    }
    // Signal dispositions set to ignore survive exec: a crash must kill the worker with its signal.
    for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGTERM, SIGPIPE}) ::signal(sig, SIG_DFL);
    ::execv(argv[0], argv.data());
    const int e = errno;
    (void)!::write(status[1], &e, sizeof e);
    ::_exit(127);
  }
  ::close(down[0]);
  ::close(up[1]);
  ::close(status[1]);
  // The status pipe closes at exec (close-on-exec): EOF means the program started, an errno that it did not.
  int child_errno = 0;
  ssize_t got;
  while ((got = ::read(status[0], &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {
  }
  ::close(status[0]);
  pid_ = pid;
  to_child_ = down[1];
  from_child_ = up[0];
  if (got == ssize_t(sizeof child_errno)) {
    WorkerReply ignored;
    reap(false, ignored);
    throw Error("cannot start the worker program " + command_[0] + ": " + std::strerror(child_errno), kExitFailure);
  }
  ++spawned_;
}

void Worker::reap(bool kill_first, WorkerReply& r) {
  if (to_child_ >= 0) ::close(to_child_);
  if (from_child_ >= 0) ::close(from_child_);
  to_child_ = from_child_ = -1;
  if (pid_ <= 0) return;
  if (kill_first) ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  if (!kill_first) {
    if (WIFSIGNALED(status)) {
      r.reason = std::string("killed by ") + signal_name(WTERMSIG(status)) + " (" + std::to_string(WTERMSIG(status)) + ")";
    } else if (WIFEXITED(status)) {
      r.reason = "exited with status " + std::to_string(WEXITSTATUS(status));
    }
  }
  pid_ = -1;
}

WorkerReply Worker::call(const std::string& request, double timeout_s) {
  WorkerReply r;
  double start = now_s();
  if (pid_ <= 0) spawn();
  if (!write_frame(to_child_, request)) {
    // The idle worker died between calls (not this request's fault): replace it and send again.
    WorkerReply ignored;
    reap(false, ignored);
    spawn();
    if (!write_frame(to_child_, request)) {
      r.kind = WorkerReply::Crashed;
      reap(false, r);
      r.seconds = now_s() - start;
      return r;
    }
  }
  std::string reply;
  int got = read_frame(from_child_, reply, timeout_s > 0 ? start + timeout_s : -1);
  r.seconds = now_s() - start;
  if (got == -1) {
    r.kind = WorkerReply::TimedOut;
    char buf[64];
    std::snprintf(buf, sizeof buf, "no answer within %.3g s; worker killed", timeout_s);
    r.reason = buf;
    reap(true, r);
    return r;
  }
  if (got == 0 || reply.empty()) {
    r.kind = WorkerReply::Crashed;
    reap(false, r);
    if (r.reason.empty()) r.reason = "worker closed its pipe";
    return r;
  }
  r.kind = reply[0] == 'O' ? WorkerReply::Ok : WorkerReply::HandlerError;
  r.payload = reply.substr(1);
  return r;
}

int serve_worker_requests(const WorkerHandler& handler) {
  struct stat in{}, out{};
  if (::fstat(3, &in) != 0 || ::fstat(4, &out) != 0 || !S_ISFIFO(in.st_mode) || !S_ISFIFO(out.st_mode)) {
    std::fprintf(stderr, "worker: runs candidates for a tuning run (requests on fd 3, replies on fd 4); it is "
                 "started by qtune, not by hand\n");
    return kExitBadInput;
  }
  std::string req;
  while (read_frame(3, req, -1) == 1) {
    std::string reply;
    try {
      reply = "O" + handler(req);
    } catch (const std::exception& e) {
      reply = std::string("E") + e.what();
    } catch (...) {
      reply = "Eunknown exception";
    }
    if (!write_frame(4, reply)) break;
  }
  return 0;
}

}  // namespace qt::tune
