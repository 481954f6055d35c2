#pragma once
// Crash isolation: candidates run in a worker process fed over a pipe. The worker is a fresh program
// (fork, then exec), never a copy of the tuner: a GPU context, a driver's internal state, threads and locks
// of the tuner process cannot leak into it, so a worker started after a crash comes up as clean as the
// first. A request is answered by the handler in the worker; a worker that dies (SIGSEGV, abort, exit) or
// does not answer within the timeout is killed and reaped, the failure is reported as Crashed / TimedOut,
// and the next call starts a fresh worker.
//
// The worker reads requests on file descriptor 3 and answers on 4 (its stdout goes to the tuner's stderr,
// so whatever a library prints cannot corrupt the frames). Frames: 4-byte little-endian length, then the
// bytes; replies start with 'O' (ok) or 'E' (the handler threw; the message follows).
#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace qt::tune {

struct WorkerReply {
  enum Kind { Ok, HandlerError, Crashed, TimedOut } kind = Ok;
  std::string payload;  // handler's answer (Ok) or exception text (HandlerError)
  std::string reason;   // "killed by SIGSEGV", "exited with status 3", "no answer within 2.0 s"
  double seconds = 0;   // wall time of the call
};

// The program a worker runs: argv[0] is the executable, the rest its arguments.
using WorkerCommand = std::vector<std::string>;

// This executable (/proc/self/exe) with `args`: how a tool starts workers of its own program.
WorkerCommand self_command(const std::vector<std::string>& args);

class Worker {
 public:
  explicit Worker(WorkerCommand command);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Throws qt::Error (exit 1) when the worker program cannot be started at all (exec failed).
  WorkerReply call(const std::string& request, double timeout_s);
  // Closes the request pipe, so the worker's loop ends, and waits for it to exit: "exited with status 0" for
  // a clean end, else how it ended ("killed by SIGABRT (6)"); "" when no worker runs.
  std::string finish();
  int spawned() const { return spawned_; }  // how many worker processes were started
  pid_t pid() const { return pid_; }

 private:
  void spawn();
  void reap(bool kill_first, WorkerReply& r);
  WorkerCommand command_;
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  int spawned_ = 0;
};

using WorkerHandler = std::function<std::string(const std::string& request)>;

// The worker side: answers the requests read on fd 3 with `handler` on fd 4 until the tuner closes the
// pipe, then returns 0. Returns 2, with a line on stderr, when fds 3 and 4 are not the pipes of a tuner (the
// program was started by hand).
int serve_worker_requests(const WorkerHandler& handler);

const char* signal_name(int sig);

}  // namespace qt::tune
