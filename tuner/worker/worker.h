#pragma once
// Crash isolation: candidates run in a forked worker process fed over a pipe. A request is answered by the
// handler in the worker; a worker that dies (SIGSEGV, abort, exit) or does not answer within the timeout
// is killed and reaped, the failure is reported as Crashed / TimedOut, and the next call starts a fresh
// worker. The tuner itself never executes candidate code.
//
// Frames on the pipes: 4-byte little-endian length, then the bytes; replies start with 'O' (ok) or 'E'
// (the handler threw; the message follows).
#include <sys/types.h>

#include <functional>
#include <string>

namespace qt::tune {

struct WorkerReply {
  enum Kind { Ok, HandlerError, Crashed, TimedOut } kind = Ok;
  std::string payload;  // handler's answer (Ok) or exception text (HandlerError)
  std::string reason;   // "killed by SIGSEGV", "exited with status 3", "no answer within 2.0 s"
  double seconds = 0;   // wall time of the call
};

class Worker {
 public:
  using Handler = std::function<std::string(const std::string& request)>;
  // `handler` runs in the child; it may allocate, spawn threads, crash or hang.
  explicit Worker(Handler handler);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  WorkerReply call(const std::string& request, double timeout_s);
  // Run around every fork(): only the forking thread is copied into the child, so a thread of the tuner that
  // holds a lock inside a library the worker uses too (NVRTC) must be stopped at a safe point first.
  void set_fork_guard(std::function<void()> before, std::function<void()> after) {
    before_fork_ = std::move(before);
    after_fork_ = std::move(after);
  }
  int spawned() const { return spawned_; }  // how many worker processes were started
  pid_t pid() const { return pid_; }

 private:
  void spawn();
  void reap(bool kill_first, WorkerReply& r);
  Handler handler_;
  std::function<void()> before_fork_, after_fork_;
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  int spawned_ = 0;
};

const char* signal_name(int sig);

}  // namespace qt::tune
