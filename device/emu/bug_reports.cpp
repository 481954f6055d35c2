#include "device/emu/bug_reports.h"

#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "device/emu/async_ops.h"
#include "device/emu/symbolize.h"

namespace qt::emu::exec {

std::string hex(uintptr_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

std::string fmt(const char* f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

std::string where(const Site& s) {
  const char* file = s.file ? s.file : "?";
  const char* slash = std::strrchr(file, '/');
  return std::string(slash ? slash + 1 : file) + ":" + std::to_string(s.line);
}

std::string dim(const Uint3& u) {
  return "(" + std::to_string(u.x) + "," + std::to_string(u.y) + "," + std::to_string(u.z) + ")";
}

void record_error(Launch& L, const std::string& msg) {
  std::lock_guard<std::mutex> lock(L.err_mu);
  if (!L.failed.load()) {
    L.error = msg;
    L.failed.store(true);
  }
}

void record_error(Worker& w, const std::string& msg) {
  record_error(*w.L, msg);
  w.aborted = true;
}

std::string host_failure(const Launch& L, const std::exception& e) {
  const std::string kernel = "emu: kernel " + L.req->kernel_name + ": ";
  if (dynamic_cast<const std::bad_alloc*>(&e))
    return kernel + "the host ran out of memory emulating it" +
           (L.opts->race_checks ? " (the race checks shadow every byte a launch touches; without them it needs less)"
                                : "");
  return kernel + e.what();
}

namespace {

std::string thread_prefix(const Fiber* f) {
  const Worker& w = *f->w;
  return "emu: kernel " + w.L->req->kernel_name + ": block " + dim(w.block_idx) + " thread " +
         dim(w.thread_idx(f->tid)) + ": ";
}

}  // namespace

void fail(Fiber* f, const std::string& msg) {
  record_error(*f->w, thread_prefix(f) + msg);
  throw FiberAbort{};
}

void fail_at(Fiber* f, const Site* site, const std::string& msg) {
  fail(f, msg + (site ? " (at " + where(*site) + ")" : std::string()));
}

void fail_code(Fiber* f, const void* code, const std::string& msg) {
  const std::string loc = code ? symbolize_code_address(code) : std::string();
  fail(f, msg + (loc.empty() ? std::string() : " (at " + loc + ")"));
}

void fail_access(Fiber* f, const Site* site, const void* code, const std::string& msg) {
  if (site) fail_at(f, site, msg);
  fail_code(f, code, msg);
}

namespace {

std::string wait_place(const Fiber& f) {
  if (f.wait_site.file) return where(f.wait_site);
  if (f.wait_code) return symbolize_code_address(f.wait_code);
  return "?";
}

// Every thread not done, grouped by what it waits on and where.
std::string waiting_threads(const Worker& w) {
  struct Group {
    std::string what, place;
    uint32_t count;
    uint32_t first;
  };
  std::vector<Group> groups;
  uint32_t exited = 0, first_exited = 0;
  for (uint32_t t = 0; t < w.nthreads; ++t) {
    const Fiber& f = w.fibers[t];
    if (f.state == State::kDone) {
      if (exited++ == 0) first_exited = t;
      continue;
    }
    const bool spinning = f.state == State::kRunnable && f.wait_code != nullptr;
    std::string what = f.state == State::kRunnable ? (spinning ? f.wait_what : "nothing (runnable)") : f.wait_what;
    std::string place = (f.state == State::kRunnable && !spinning) ? (f.started ? "its last switch" : "the kernel's start")
                                                                    : wait_place(f);
    bool found = false;
    for (Group& g : groups) {
      if (g.what == what && g.place == place) {
        ++g.count;
        found = true;
        break;
      }
    }
    if (!found) groups.push_back(Group{what, place, 1, t});
  }
  std::string msg;
  for (const Group& g : groups) {
    msg += fmt(" %u thread(s) wait in %s at %s (first: thread %s);", g.count, g.what.c_str(), g.place.c_str(),
               dim(w.thread_idx(g.first)).c_str());
  }
  if (exited) msg += fmt(" %u thread(s) exited without reaching it (first: thread %s)", exited, dim(w.thread_idx(first_exited)).c_str());
  if (w.bar_count) msg += fmt(" [divergent barrier: __syncthreads at %s reached by %u of %u threads]", where(w.bar_site).c_str(), w.bar_count, w.nthreads);
  return msg;
}

// Lanes of one warp waiting in collectives whose member masks overlap but differ: they can never meet.
std::string mask_disagreements(const Worker& w) {
  std::string msg;
  for (size_t i = 0; i < w.warps.size(); ++i) {
    const auto& open = w.warps[i].open;
    for (size_t a = 0; a < open.size(); ++a) {
      for (size_t b = a + 1; b < open.size(); ++b) {
        if ((open[a].mask & open[b].mask) == 0 || open[a].mask == open[b].mask) continue;
        msg += fmt(" lanes disagree on the member mask in warp %zu: lanes 0x%08x wait in %s at %s with member mask "
                   "0x%08x, lanes 0x%08x wait in %s at %s with member mask 0x%08x;",
                   i, open[a].arrived, open[a].what, where(open[a].site).c_str(), open[a].mask, open[b].arrived,
                   open[b].what, where(open[b].site).c_str(), open[b].mask);
      }
    }
  }
  return msg;
}

}  // namespace

std::string deadlock_report(const Worker& w) {
  return "emu: kernel " + w.L->req->kernel_name + ": block " + dim(w.block_idx) + ": deadlock: no thread can run." +
         mask_disagreements(w) + waiting_threads(w) + async_wait_notes(w);
}

std::string no_progress_report(const Worker& w, double seconds, uint64_t polls) {
  return "emu: kernel " + w.L->req->kernel_name + ": block " + dim(w.block_idx) +
         fmt(": no progress (watchdog): for %.1f s and %llu spin-wait polls no thread wrote memory or completed a "
             "synchronisation.", seconds, static_cast<unsigned long long>(polls)) +
         waiting_threads(w) + async_wait_notes(w);
}

// ---- crashes the access checks cannot see -----------------------------------------------------------------
// Kernel modules are built with -fstack-clash-protection, so a big frame cannot jump over a fiber stack's
// guard pages: an overflow always faults on one and is recognised here.
namespace {

thread_local Worker* tl_worker = nullptr;
struct sigaction g_prev_segv {}, g_prev_bus {};

[[maybe_unused]] void crash_handler(int sig, siginfo_t* info, void* uc) {
  Worker* w = tl_worker;
  if (w && w->L && w->current) {
    const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
    const Fiber* f = w->current;
    const Uint3 t = w->thread_idx(f->tid);
    const Arena& arena = Arena::instance();
    const char* what = w->stacks.is_guard(addr)
                           ? "fiber stack overflow (the kernel needs more than ~240 KiB of stack per thread)"
                           : (addr - arena.lo() < arena.span()
                                  ? "access to unmapped device memory (out of bounds or freed) the access checks did not see"
                                  : "invalid memory access");
    char buf[768];
    const int n = std::snprintf(buf, sizeof buf, "emu: kernel %s: block (%u,%u,%u) thread (%u,%u,%u): %s at address 0x%llx\n",
                                w->L->req->kernel_name.c_str(), w->block_idx.x, w->block_idx.y, w->block_idx.z, t.x, t.y,
                                t.z, what, static_cast<unsigned long long>(addr));
    if (n > 0) {
      const ssize_t written = ::write(2, buf, static_cast<size_t>(std::min<int>(n, static_cast<int>(sizeof buf) - 1)));
      (void)written;
    }
  }
  const struct sigaction& prev = sig == SIGBUS ? g_prev_bus : g_prev_segv;
  if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
    prev.sa_sigaction(sig, info, uc);
  } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
  } else {
    ::signal(sig, SIG_DFL);  // returning re-executes the access, which now terminates the process
  }
}

}  // namespace

void install_crash_handler() {
#if !defined(__SANITIZE_ADDRESS__)
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = &crash_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGSEGV, &sa, &g_prev_segv);
    ::sigaction(SIGBUS, &sa, &g_prev_bus);
  });
#endif
}

void crash_scope_worker(Worker* w) { tl_worker = w; }

CrashScope::CrashScope(Worker& w) {
  tl_worker = &w;
  stack_t alt{};
  alt.ss_sp = w.signal_stack.data();
  alt.ss_size = w.signal_stack.size();
  ::sigaltstack(&alt, &old_alt_);
}

CrashScope::~CrashScope() {
  ::sigaltstack(&old_alt_, nullptr);
  tl_worker = nullptr;
}

}  // namespace qt::emu::exec
