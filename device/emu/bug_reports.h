#pragma once
// Kernel-bug reports: every message names the kernel, the block, the thread and, where known, the source
// line. The first bug of a launch is the one reported; the fiber that found it unwinds and the launch
// winds down. Crashes the checks cannot see (a fiber stack overflow, a wild access) are named the same way
// before the process dies.
#include <signal.h>

#include <cstdint>
#include <exception>
#include <string>

#include "device/emu/executor_state.h"

namespace qt::emu::exec {

std::string hex(uintptr_t v);
std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string where(const Site& s);  // "file.cu:42"
std::string dim(const Uint3& u);   // "(x,y,z)"

// Records `msg` as the launch's error unless another bug came first, and aborts the Worker's block.
void record_error(Worker& w, const std::string& msg);
void record_error(Launch& L, const std::string& msg);
// The launch's error for an exception the host raised while running it (out of memory above all): a
// std::exception must not leave a fiber or a block-running thread, where nothing can catch it.
std::string host_failure(const Launch& L, const std::exception& e);

// Report a bug found in thread `f` and unwind it (throws FiberAbort): fail_at names the kernel source
// line, fail_code the line of a code address in the kernel module, fail_access whichever is known.
[[noreturn]] void fail(Fiber* f, const std::string& msg);
[[noreturn]] void fail_at(Fiber* f, const Site* site, const std::string& msg);
[[noreturn]] void fail_code(Fiber* f, const void* code, const std::string& msg);
[[noreturn]] void fail_access(Fiber* f, const Site* site, const void* code, const std::string& msg);

// The block of `w` can make no progress: which threads wait where (and which lanes disagree on a member mask).
std::string deadlock_report(const Worker& w);
// The block of `w` only spins: `seconds` and `polls` without progress; every thread not yet done, where it
// waits and on what.
std::string no_progress_report(const Worker& w, double seconds, uint64_t polls);

// Installs, once per process, the SIGSEGV/SIGBUS handler that names the crashing kernel thread and then
// passes the signal on. Not under AddressSanitizer, which reports these crashes itself.
void install_crash_handler();

// The Worker whose running fiber a crash on this host thread is reported for (a cluster's CTAs take turns).
void crash_scope_worker(Worker* w);

// While alive, a crash on this host thread is reported as one of the kernel thread `w` runs. The handler
// runs on the Worker's own signal stack: a fiber stack overflow leaves no room on the faulting stack.
class CrashScope {
 public:
  explicit CrashScope(Worker& w);
  ~CrashScope();
  CrashScope(const CrashScope&) = delete;
  CrashScope& operator=(const CrashScope&) = delete;

 private:
  stack_t old_alt_{};
};

}  // namespace qt::emu::exec
