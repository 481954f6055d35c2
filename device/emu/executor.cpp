#include "device/emu/executor.h"

#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "kernels_src/common/emu_ops.h"
#include "device/emu/arena.h"
#include "device/emu/fiber.h"
#include "device/emu/symbolize.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define QT_EMU_ASAN 1
#endif

namespace qt::emu {
namespace {

constexpr uint32_t kStaticSmemBytes = 48 * 1024;
constexpr uint32_t kMaxDynamicSmemBytes = 227 * 1024;
constexpr uint32_t kWindowBytes = ((kStaticSmemBytes + kMaxDynamicSmemBytes) + 4095) & ~4095u;
constexpr uintptr_t kSmemGuardBytes = 64 * 1024;
constexpr uint32_t kMaxThreads = 1024;
constexpr uint16_t kMultiMixed = 0xFFFF;  // several readers from different warps
constexpr uint16_t kMultiWarp = 0x8000;   // | warp: several readers, all in one warp

std::string hex(uintptr_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}
std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
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
bool same_site(const Site& a, const Site& b) {
  return a.line == b.line && a.column == b.column && (a.file == b.file || std::strcmp(a.file, b.file) == 0);
}
std::string dim(const Uint3& u) { return "(" + std::to_string(u.x) + "," + std::to_string(u.y) + "," + std::to_string(u.z) + ")"; }

struct FiberAbort {};

enum class State : uint8_t { kRunnable, kBarrier, kWarp, kDone };

struct CpCopy {
  uint32_t dst_off;
  const uint8_t* src;
  uint32_t cp_size, src_size;
};

struct Shadow {
  uint32_t w_epoch, r_epoch;
  uint16_t w_tid, r_tid;
  uint16_t w_gen, r_gen;
};

struct Worker;

struct Fiber {
  Context context;
  FiberCtx* ctx = nullptr;
  Worker* w = nullptr;
  uint32_t tid = 0, lane = 0, warp = 0;
  State state = State::kDone;
  bool started = false;
  Site wait_site{};
  const char* wait_what = "";
  std::vector<CpCopy> uncommitted;
  std::deque<std::vector<CpCopy>> groups;
  union {
    struct {
      uint64_t value;
      uint32_t b, c;
    } shfl;
    int pred;
    uint32_t addr;
    struct {
      uint32_t a[4], b[2];
      float c[4];
    } mma;
  } in{};
  union {
    uint64_t v;
    uint32_t r[4];
    float d[4];
  } out{};
#if QT_EMU_ASAN
  void* fake_stack = nullptr;
#endif
};

struct Rendezvous {
  uint32_t mask, arrived, op;
  Site site;
  const char* what;
};

struct Warp {
  Fiber* lanes[32] = {};
  uint32_t exists = 0, exited = 0;
  std::vector<Rendezvous> open;
  uint32_t gen = 0;
  struct {
    uint32_t gen, mask;
  } ring[16] = {};
};

enum Op : uint32_t { kOpShfl = 0x10, kOpVote = 0x20, kOpSyncwarp = 0x30, kOpLdmatrix = 0x40, kOpMma = 0x50 };

struct Launch {
  const LaunchRequest* req = nullptr;
  std::vector<Allocation> allocs;
  uint64_t nblocks = 0;
  std::atomic<uint64_t> next_block{0};
  std::atomic<bool> failed{false};
  std::mutex err_mu;
  std::string error;
  const ExecOptions* opts = nullptr;
};

struct Worker {
  explicit Worker() : stacks(kMaxThreads), fibers(kMaxThreads) {
    void* m = ::mmap(nullptr, kWindowBytes + 2 * kSmemGuardBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) throw qt::Error("emu: cannot map shared memory window", kExitFailure);
    mapping = m;
    window = static_cast<uint8_t*>(m) + kSmemGuardBytes;
    ::mprotect(window, kWindowBytes, PROT_READ | PROT_WRITE);
    shadow.assign(kWindowBytes, Shadow{});
    pending.assign(kWindowBytes, 0);
    for (uint32_t i = 0; i < kMaxThreads; ++i) {
      fibers[i].ctx = stacks.ctx(i);
      fibers[i].w = this;
      fibers[i].tid = i;
      fibers[i].lane = i % 32;
      fibers[i].warp = i / 32;
    }
  }
  ~Worker() { ::munmap(mapping, kWindowBytes + 2 * kSmemGuardBytes); }

  Launch* L = nullptr;
  StackPool stacks;
  std::vector<Fiber> fibers;
  Context sched;
  std::vector<Fiber*> runq;
  uint64_t rng = 0;
  void* mapping = nullptr;
  uint8_t* window = nullptr;
  std::vector<Shadow> shadow;
  std::vector<uint16_t> pending;
  bool pending_dirty = false;
  uint32_t epoch = 0;
  // the block being run
  Uint3 block_idx{}, block_dim{}, grid_dim{};
  uint32_t nthreads = 0, done_count = 0, dyn_bytes = 0;
  uint32_t bar_count = 0;
  Site bar_site{};
  BarrierKind bar_kind = BarrierKind::kPlain;
  int bar_acc = 0, bar_result = 0;
  std::vector<Warp> warps;
  std::vector<std::pair<const void*, uint32_t>> static_map;
  uint32_t static_used = 0;
  bool aborted = false;
  Fiber* current = nullptr;  // the running fiber (null while the scheduler runs)
  std::vector<char> signal_stack = std::vector<char>(64 * 1024);
  size_t alloc_hint = 0;
  uint64_t switches = 0, threads_run = 0, blocks_run = 0;
#if QT_EMU_ASAN
  void* sched_fake_stack = nullptr;
  const void* sched_bottom = nullptr;
  size_t sched_size = 0;
#endif

  uint64_t next_random() {  // splitmix64
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  Uint3 thread_idx(uint32_t tid) const {
    return Uint3{tid % block_dim.x, (tid / block_dim.x) % block_dim.y, tid / (block_dim.x * block_dim.y)};
  }
};

Fiber* fiber_of(FiberCtx* c) { return static_cast<Fiber*>(c->fiber); }

// ---- context switches ---------------------------------------------------------------------------------
// The next thread to run, in seeded random order; null when none is runnable or the block was aborted.
Fiber* pick(Worker& w) {
  if (w.aborted || w.runq.empty()) return nullptr;
  const size_t i = w.next_random() % w.runq.size();
  Fiber* f = w.runq[i];
  w.runq[i] = w.runq.back();
  w.runq.pop_back();
  return f;
}

// Saves the running context into `from` and continues `to` (the scheduler when null). Blocked threads hand
// over directly to the next runnable one, so a barrier costs one switch per thread, not two.
void jump(Worker& w, Context* from, void** fake_stack_save, Fiber* to) {
  ++w.switches;
  w.current = to;
#if QT_EMU_ASAN
  const void* bottom = w.sched_bottom;
  size_t size = w.sched_size;
  if (to) {
    bottom = w.stacks.stack_lo(to->tid);
    size = static_cast<size_t>(static_cast<char*>(w.stacks.stack_hi(to->tid)) - static_cast<const char*>(bottom));
  }
  __sanitizer_start_switch_fiber(fake_stack_save, bottom, size);
#else
  (void)fake_stack_save;
#endif
  switch_context(from, to ? to->context : w.sched);
#if QT_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake_stack_save ? *fake_stack_save : nullptr, nullptr, nullptr);
#endif
}

void resume(Worker& w, Fiber* f) {
#if QT_EMU_ASAN
  jump(w, &w.sched, &w.sched_fake_stack, f);
#else
  jump(w, &w.sched, nullptr, f);
#endif
}

// Suspends the running fiber until it is picked again; unwinds it if the launch was aborted meanwhile.
void yield(Fiber* f) {
  Worker& w = *f->w;
#if QT_EMU_ASAN
  jump(w, &f->context, &f->fake_stack, pick(w));
#else
  jump(w, &f->context, nullptr, pick(w));
#endif
  if (w.aborted) throw FiberAbort{};
}

void make_runnable(Worker& w, Fiber* f) {
  f->state = State::kRunnable;
  w.runq.push_back(f);
}

// ---- errors ----------------------------------------------------------------------------------------------
void record_error(Worker& w, const std::string& msg) {
  Launch& L = *w.L;
  std::lock_guard<std::mutex> lock(L.err_mu);
  if (!L.failed.load()) {
    L.error = msg;
    L.failed.store(true);
  }
  w.aborted = true;
}

std::string thread_prefix(const Fiber* f) {
  const Worker& w = *f->w;
  return "emu: kernel " + w.L->req->kernel_name + ": block " + dim(w.block_idx) + " thread " +
         dim(w.thread_idx(f->tid)) + ": ";
}

[[noreturn]] void fail(Fiber* f, const std::string& msg) {
  record_error(*f->w, thread_prefix(f) + msg);
  throw FiberAbort{};
}

[[noreturn]] void fail_at(Fiber* f, const Site* site, const std::string& msg) {
  fail(f, msg + (site ? " (at " + where(*site) + ")" : std::string()));
}

[[noreturn]] void fail_code(Fiber* f, const void* code, const std::string& msg) {
  const std::string loc = code ? symbolize_code_address(code) : std::string();
  fail(f, msg + (loc.empty() ? std::string() : " (at " + loc + ")"));
}

// ---- shared memory -------------------------------------------------------------------------------------
bool smem_valid(const Worker& w, uint64_t off, uint64_t n) {
  return off + n <= w.static_used || (off >= kStaticSmemBytes && off + n <= uint64_t{kStaticSmemBytes} + w.dyn_bytes);
}

std::string smem_region(const Worker& w, uint64_t off) {
  if (off < kStaticSmemBytes) return "static shared offset " + std::to_string(off) + " (static shared size " + std::to_string(w.static_used) + ")";
  return "dynamic shared offset " + std::to_string(off - kStaticSmemBytes) + " (dynamic shared size " + std::to_string(w.dyn_bytes) + ")";
}

// True if a __syncwarp whose member mask covers all lanes in `need` completed after generation `since`.
bool warp_ordered(const Warp& wp, uint16_t since, uint32_t need) {
  const uint16_t now = static_cast<uint16_t>(wp.gen);
  const uint16_t dist = static_cast<uint16_t>(now - since);
  if (dist == 0) return false;
  if (dist > 16) return true;  // older than the ring remembers: many warp syncs happened since
  for (uint16_t k = 1; k <= dist; ++k) {
    const auto& e = wp.ring[static_cast<uint16_t>(since + k) % 16];
    if ((e.mask & need) == need) return true;
  }
  return false;
}
uint32_t lanes2(uint32_t a, uint32_t b) { return (1u << a) | (1u << b); }

std::string other_thread(const Worker& w, uint16_t tid) {
  if (tid == kMultiMixed) return "threads of several warps";
  if (tid & kMultiWarp) return "several threads of warp " + std::to_string(tid & 0x7fff);
  return "thread " + dim(w.thread_idx(tid));
}

void shadow_access(Fiber* f, uint32_t off, uint32_t n, bool write, const void* code, const Site* site,
                   const char* what) {
  Worker& w = *f->w;
  const uint16_t me = static_cast<uint16_t>(f->tid);
  const Warp& wp = w.warps[f->warp];
  const uint16_t gen = static_cast<uint16_t>(wp.gen);
  auto race = [&](const std::string& other, const char* other_did) {
    std::string msg = fmt("shared-memory race: %s %s %u byte(s) at %s, which %s %s in the same barrier interval (no "
                          "__syncthreads, or __syncwarp covering both, in between)",
                          what, write ? "writes" : "reads", n, smem_region(w, off).c_str(), other.c_str(), other_did);
    if (site) fail_at(f, site, msg);
    fail_code(f, code, msg);
  };
  for (uint32_t i = 0; i < n; ++i) {
    Shadow& s = w.shadow[off + i];
    if (uint16_t p = w.pending[off + i]; p != 0) {
      std::string msg = fmt("%s %s %u byte(s) at %s while a cp.async into it issued by thread %s is still pending "
                            "(missing cp_async_wait before the access, or a missing __syncthreads after it)",
                            what, write ? "writes" : "reads", n, smem_region(w, off).c_str(), dim(w.thread_idx(p - 1u)).c_str());
      if (site) fail_at(f, site, msg);
      fail_code(f, code, msg);
    }
    if (s.w_epoch == w.epoch && s.w_tid != me &&
        !(s.w_tid / 32 == f->warp && warp_ordered(wp, s.w_gen, lanes2(s.w_tid % 32, f->lane)))) {
      race(other_thread(w, s.w_tid), "wrote");
    }
    if (write) {
      if (s.r_epoch == w.epoch && s.r_tid != me) {
        bool ok;
        if (s.r_tid == kMultiMixed) ok = false;
        else if (s.r_tid & kMultiWarp) ok = (s.r_tid & 0x7fff) == f->warp && warp_ordered(wp, s.r_gen, wp.exists);
        else ok = s.r_tid / 32 == f->warp && warp_ordered(wp, s.r_gen, lanes2(s.r_tid % 32, f->lane));
        if (!ok) race(other_thread(w, s.r_tid), "read");
      }
      s.w_epoch = w.epoch;
      s.w_tid = me;
      s.w_gen = gen;
    } else {
      if (s.r_epoch != w.epoch) {
        s.r_epoch = w.epoch;
        s.r_tid = me;
        s.r_gen = gen;
      } else if (s.r_tid != me) {
        const uint32_t prev_warp = (s.r_tid == kMultiMixed) ? ~0u : ((s.r_tid & kMultiWarp) ? (s.r_tid & 0x7fffu) : s.r_tid / 32u);
        s.r_tid = prev_warp == f->warp ? static_cast<uint16_t>(kMultiWarp | f->warp) : kMultiMixed;
        s.r_gen = gen;
      }
    }
  }
}

// Written with subtractions: a wild pointer near 2^64 must not wrap a + n around into an allocation.
bool inside(const Allocation& al, uintptr_t a, uint64_t n) {
  return a >= al.base && n <= al.bytes && a - al.base <= al.bytes - n;
}

// Global memory: is [a, a + n) inside one live allocation?
bool global_valid(Worker& w, uintptr_t a, uint64_t n) {
  const auto& v = w.L->allocs;
  if (w.alloc_hint < v.size() && inside(v[w.alloc_hint], a, n)) return true;
  auto it = std::upper_bound(v.begin(), v.end(), a, [](uintptr_t x, const Allocation& al) { return x < al.base; });
  if (it == v.begin()) return false;
  --it;
  if (inside(*it, a, n)) {
    w.alloc_hint = static_cast<size_t>(it - v.begin());
    return true;
  }
  return false;
}

void check_access(Fiber* f, uintptr_t a, uint32_t bytes, uint32_t flags, const void* code, const Site* site,
                  bool track_race, const char* what) {
  Worker& w = *f->w;
  const bool write = flags & kAccessWrite;
  auto report = [&](const std::string& msg) {
    if (site) fail_at(f, site, msg);
    fail_code(f, code, msg);
  };
  if ((flags & kAccessAligned) && bytes > 1 && (a % bytes) != 0) {
    report(fmt("misaligned %u-byte %s at address %s (must be %u-byte aligned)", bytes, write ? "write" : "read",
               hex(a).c_str(), bytes));
  }
  const uintptr_t win = reinterpret_cast<uintptr_t>(w.window);
  if (a + kSmemGuardBytes >= win && a < win + kWindowBytes + kSmemGuardBytes) {
    const int64_t off = static_cast<int64_t>(a) - static_cast<int64_t>(win);
    if (off < 0 || !smem_valid(w, static_cast<uint64_t>(off), bytes)) {
      report(fmt("out-of-bounds shared %s of %u byte(s) at shared offset %lld (static shared in use: %u bytes; "
                 "dynamic: %u bytes at offset %u)",
                 write ? "write" : "read", bytes, static_cast<long long>(off), w.static_used, w.dyn_bytes, kStaticSmemBytes));
    }
    if (track_race && w.L->opts->race_checks) shadow_access(f, static_cast<uint32_t>(off), bytes, write, code, site, what);
    return;
  }
  if (!global_valid(w, a, bytes)) {
    report(fmt("out-of-bounds global %s of %u byte(s) at %s: %s", write ? "write" : "read", bytes, hex(a).c_str(),
               Arena::instance().describe(a).c_str()));
  }
}

// ---- Api functions ---------------------------------------------------------------------------------------
void api_access(FiberCtx* c, const void* p, uint32_t bytes, uint32_t flags, const void* code) {
  Fiber* f = fiber_of(c);
  check_access(f, reinterpret_cast<uintptr_t>(p), bytes, flags, code, nullptr, true, "this thread");
}

int api_barrier(FiberCtx* c, BarrierKind kind, int pred, const Site* site) {
  Fiber* f = fiber_of(c);
  Worker& w = *f->w;
  if (w.bar_count == 0) {
    w.bar_site = *site;
    w.bar_kind = kind;
    w.bar_acc = kind == BarrierKind::kAnd ? 1 : 0;
  } else if (!same_site(w.bar_site, *site) || w.bar_kind != kind) {
    fail_at(f, site,
            fmt("divergent barrier: this thread reached __syncthreads while %u other thread(s) wait at the barrier at %s",
                w.bar_count, where(w.bar_site).c_str()));
  }
  switch (kind) {
    case BarrierKind::kPlain: break;
    case BarrierKind::kCount: w.bar_acc += pred != 0; break;
    case BarrierKind::kAnd: w.bar_acc = w.bar_acc && pred != 0; break;
    case BarrierKind::kOr: w.bar_acc = w.bar_acc || pred != 0; break;
  }
  if (++w.bar_count == w.nthreads) {
    w.bar_result = w.bar_acc;
    w.bar_count = 0;
    ++w.epoch;
    for (uint32_t t = 0; t < w.nthreads; ++t) {
      if (w.fibers[t].state == State::kBarrier) make_runnable(w, &w.fibers[t]);
    }
    return w.bar_result;
  }
  f->state = State::kBarrier;
  f->wait_site = *site;
  f->wait_what = "__syncthreads";
  yield(f);
  return w.bar_result;
}

void complete(Fiber* f, Warp& wp, const Rendezvous& r);

void collective(Fiber* f, uint32_t op, uint32_t mask, const Site* site, bool aligned, const char* what) {
  Worker& w = *f->w;
  Warp& wp = w.warps[f->warp];
  const uint32_t bit = 1u << f->lane;
  if (!(mask & bit)) fail_at(f, site, fmt("%s with member mask 0x%08x that lacks the calling lane %u", what, mask, f->lane));
  if (mask & ~wp.exists) {
    fail_at(f, site, fmt("%s with member mask 0x%08x names lanes that do not exist (warp %u has lanes 0x%08x)", what,
                         mask, f->warp, wp.exists));
  }
  Rendezvous* r = nullptr;
  for (Rendezvous& o : wp.open) {
    if (o.mask & mask) {
      r = &o;
      break;
    }
  }
  if (!r) {
    wp.open.push_back(Rendezvous{mask, 0, op, *site, what});
    r = &wp.open.back();
  } else {
    if (r->mask != mask) {
      fail_at(f, site, fmt("%s: lanes disagree on the member mask: this lane passes 0x%08x, lanes waiting in %s at %s passed 0x%08x",
                           what, mask, r->what, where(r->site).c_str(), r->mask));
    }
    if (r->op != op) {
      fail_at(f, site, fmt("%s meets a different warp collective (%s at %s) of the same lanes", what, r->what,
                           where(r->site).c_str()));
    }
    if (aligned && !same_site(r->site, *site)) {
      fail_at(f, site, fmt("%s (.aligned) reached at a different call site than the other lanes' (%s): divergent warp",
                           what, where(r->site).c_str()));
    }
  }
  if (uint32_t gone = mask & wp.exited) {
    fail_at(f, site, fmt("%s with member mask 0x%08x, but lane %d already exited", what, mask, __builtin_ctz(gone)));
  }
  r->arrived |= bit;
  if (r->arrived == r->mask) {
    const Rendezvous done = *r;
    wp.open.erase(wp.open.begin() + (r - wp.open.data()));
    complete(f, wp, done);
    for (uint32_t m = done.mask & ~bit; m; m &= m - 1) make_runnable(w, wp.lanes[__builtin_ctz(m)]);
    return;
  }
  f->state = State::kWarp;
  f->wait_site = *site;
  f->wait_what = what;
  yield(f);
}

uint16_t h16(uint32_t reg, int half) { return static_cast<uint16_t>(half ? reg >> 16 : reg & 0xffff); }

void complete(Fiber* f, Warp& wp, const Rendezvous& r) {
  Worker& w = *f->w;
  const uint32_t kind = r.op & 0xf0u, sub = r.op & 0x0fu;
  switch (kind) {
    case kOpShfl: {
      for (uint32_t m = r.mask; m; m &= m - 1) {
        const uint32_t l = __builtin_ctz(m);
        Fiber* fl = wp.lanes[l];
        const int j = shfl_source_lane(static_cast<int>(sub), l, fl->in.shfl.b, fl->in.shfl.c);
        if (j < 0) {
          fl->out.v = fl->in.shfl.value;
        } else if (!(r.mask & (1u << j))) {
          fail_at(f, &r.site, fmt("__shfl_sync: lane %u reads lane %d, which is not in the member mask 0x%08x "
                                  "(undefined on the GPU)", l, j, r.mask));
        } else {
          fl->out.v = wp.lanes[j]->in.shfl.value;
        }
      }
      break;
    }
    case kOpVote: {
      uint32_t ballot = 0;
      for (uint32_t m = r.mask; m; m &= m - 1) {
        const uint32_t l = __builtin_ctz(m);
        if (wp.lanes[l]->in.pred) ballot |= 1u << l;
      }
      const uint32_t v = sub == 0 ? ballot : (sub == 1 ? (ballot != 0) : (ballot == r.mask));
      for (uint32_t m = r.mask; m; m &= m - 1) wp.lanes[__builtin_ctz(m)]->out.v = v;
      break;
    }
    case kOpSyncwarp: {
      ++wp.gen;
      wp.ring[static_cast<uint16_t>(wp.gen) % 16] = {wp.gen, r.mask};
      break;
    }
    case kOpLdmatrix: {
      const uint32_t num = sub & 7u;
      const bool trans = sub & 8u;
      uint16_t mat[4][8][8];
      for (uint32_t m = 0; m < num; ++m) {
        for (uint32_t row = 0; row < 8; ++row) {
          Fiber* src = wp.lanes[8 * m + row];
          const uint32_t addr = src->in.addr;
          if (addr % 16 != 0) {
            fail_at(src, &r.site, fmt("ldmatrix: row address %u (shared) given by lane %u is not 16-byte aligned", addr, 8 * m + row));
          }
          if (!smem_valid(w, addr, 16)) {
            fail_at(src, &r.site, fmt("ldmatrix: row address given by lane %u is out of bounds: %s", 8 * m + row,
                                      smem_region(w, addr).c_str()));
          }
          if (w.L->opts->race_checks) shadow_access(src, addr, 16, false, nullptr, &r.site, "ldmatrix row of this thread");
          std::memcpy(mat[m][row], w.window + addr, 16);
        }
      }
      for (uint32_t l = 0; l < 32; ++l) {
        for (uint32_t m = 0; m < num; ++m) {
          const uint16_t lo = mat[m][ldmatrix_row(l, 0, trans)][ldmatrix_col(l, 0, trans)];
          const uint16_t hi = mat[m][ldmatrix_row(l, 1, trans)][ldmatrix_col(l, 1, trans)];
          wp.lanes[l]->out.r[m] = pack16(lo, hi);
        }
      }
      break;
    }
    case kOpMma: {
      const bool bf = sub == 1;
      auto val = [bf](uint16_t h) { return static_cast<double>(bf ? bf16_bits_to_float(h) : half_bits_to_float(h)); };
      double A[16][16], B[16][8], C[16][8];
      for (int l = 0; l < 32; ++l) {
        const Fiber* fl = wp.lanes[l];
        for (int i = 0; i < 8; ++i) A[mma_a_row(l, i)][mma_a_col(l, i)] = val(h16(fl->in.mma.a[i / 2], i % 2));
        for (int i = 0; i < 4; ++i) B[mma_b_row(l, i)][mma_b_col(l, i)] = val(h16(fl->in.mma.b[i / 2], i % 2));
        for (int i = 0; i < 4; ++i) C[mma_c_row(l, i)][mma_c_col(l, i)] = fl->in.mma.c[i];
      }
      for (int l = 0; l < 32; ++l) {
        for (int i = 0; i < 4; ++i) {
          const int row = mma_c_row(l, i), col = mma_c_col(l, i);
          double acc = 0.0;
          for (int k = 0; k < 16; ++k) acc += A[row][k] * B[k][col];
          wp.lanes[l]->out.d[i] = static_cast<float>(acc + C[row][col]);
        }
      }
      break;
    }
    default: break;
  }
}

void api_syncwarp(FiberCtx* c, uint32_t mask, const Site* site) {
  collective(fiber_of(c), kOpSyncwarp, mask, site, false, "__syncwarp");
}

uint64_t api_shfl(FiberCtx* c, ShflMode mode, uint32_t mask, uint64_t value, uint32_t b, uint32_t cc, uint32_t /*bytes*/,
                  const Site* site) {
  Fiber* f = fiber_of(c);
  f->in.shfl.value = value;
  f->in.shfl.b = b;
  f->in.shfl.c = cc;
  collective(f, kOpShfl | static_cast<uint32_t>(mode), mask, site, false, "__shfl_sync");
  return f->out.v;
}

uint32_t api_vote(FiberCtx* c, VoteKind kind, uint32_t mask, int pred, const Site* site) {
  Fiber* f = fiber_of(c);
  f->in.pred = pred;
  static const char* names[] = {"__ballot_sync", "__any_sync", "__all_sync"};
  collective(f, kOpVote | static_cast<uint32_t>(kind), mask, site, false, names[static_cast<int>(kind)]);
  return static_cast<uint32_t>(f->out.v);
}

void api_ldmatrix(FiberCtx* c, uint32_t num, bool trans, uint32_t smem_addr, uint32_t* out, const Site* site) {
  Fiber* f = fiber_of(c);
  f->in.addr = smem_addr;
  collective(f, kOpLdmatrix | num | (trans ? 8u : 0u), 0xffffffffu, site, true, trans ? "ldmatrix.trans" : "ldmatrix");
  for (uint32_t m = 0; m < num; ++m) out[m] = f->out.r[m];
}

void api_mma(FiberCtx* c, MmaKind kind, float* d, const uint32_t* a, const uint32_t* b, const float* cin, const Site* site) {
  Fiber* f = fiber_of(c);
  std::memcpy(f->in.mma.a, a, 16);
  std::memcpy(f->in.mma.b, b, 8);
  std::memcpy(f->in.mma.c, cin, 16);
  collective(f, kOpMma | static_cast<uint32_t>(kind), 0xffffffffu, site, true, "mma.sync.m16n8k16");
  std::memcpy(d, f->out.d, 16);
}

void complete_copy(Worker& w, Fiber* f, const CpCopy& cp) {
  uint8_t* dst = w.window + cp.dst_off;
  if (cp.src_size) std::memcpy(dst, cp.src, cp.src_size);
  if (cp.src_size < cp.cp_size) std::memset(dst + cp.src_size, 0, cp.cp_size - cp.src_size);
  for (uint32_t i = 0; i < cp.cp_size; ++i) {
    w.pending[cp.dst_off + i] = 0;
    Shadow& s = w.shadow[cp.dst_off + i];
    s.w_epoch = w.epoch;
    s.w_tid = static_cast<uint16_t>(f->tid);
    s.w_gen = static_cast<uint16_t>(w.warps[f->warp].gen);
  }
}

void api_cp_async(FiberCtx* c, uint32_t smem_addr, const void* src, uint32_t cp_size, uint32_t src_size, const Site* site) {
  Fiber* f = fiber_of(c);
  Worker& w = *f->w;
  if (src_size > cp_size) fail_at(f, site, fmt("cp.async: src-size %u exceeds cp-size %u", src_size, cp_size));
  if (smem_addr % cp_size != 0) {
    fail_at(f, site, fmt("cp.async: shared destination %u is not %u-byte aligned", smem_addr, cp_size));
  }
  const uintptr_t s = reinterpret_cast<uintptr_t>(src);
  if (s % cp_size != 0) fail_at(f, site, fmt("cp.async: global source %s is not %u-byte aligned", hex(s).c_str(), cp_size));
  if (!smem_valid(w, smem_addr, cp_size)) {
    fail_at(f, site, fmt("cp.async: out-of-bounds shared destination of %u bytes at %s", cp_size, smem_region(w, smem_addr).c_str()));
  }
  if (src_size > 0 && !global_valid(w, s, src_size)) {
    fail_at(f, site, fmt("cp.async: out-of-bounds global source of %u bytes at %s: %s", src_size, hex(s).c_str(),
                         Arena::instance().describe(s).c_str()));
  }
  if (w.L->opts->race_checks) shadow_access(f, smem_addr, cp_size, true, nullptr, site, "cp.async of this thread");
  std::memset(w.window + smem_addr, 0xFF, cp_size);
  for (uint32_t i = 0; i < cp_size; ++i) w.pending[smem_addr + i] = static_cast<uint16_t>(f->tid + 1);
  w.pending_dirty = true;
  f->uncommitted.push_back(CpCopy{smem_addr, static_cast<const uint8_t*>(src), cp_size, src_size});
}

void api_cp_async_commit(FiberCtx* c) {
  Fiber* f = fiber_of(c);
  f->groups.push_back(std::move(f->uncommitted));
  f->uncommitted.clear();
}

void api_cp_async_wait(FiberCtx* c, uint32_t allowed, const Site*) {
  Fiber* f = fiber_of(c);
  while (f->groups.size() > allowed) {
    for (const CpCopy& cp : f->groups.front()) complete_copy(*f->w, f, cp);
    f->groups.pop_front();
  }
}

template <class T>
T apply_op(AtomicOp op, T old, T v) {
  switch (op) {
    case AtomicOp::kAdd: return static_cast<T>(old + v);
    case AtomicOp::kSub: return static_cast<T>(old - v);
    case AtomicOp::kMin: return v < old ? v : old;
    case AtomicOp::kMax: return v > old ? v : old;
    case AtomicOp::kExch: return v;
    default: break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case AtomicOp::kAnd: return old & v;
      case AtomicOp::kOr: return old | v;
      case AtomicOp::kXor: return old ^ v;
      default: break;
    }
  }
  return v;
}

template <class T, class Bits>
uint64_t atomic_rmw(AtomicOp op, void* p, uint64_t vbits, uint64_t cbits) {
  Bits* bp = static_cast<Bits*>(p);
  Bits v, cmp;
  std::memcpy(&v, &vbits, sizeof(Bits));
  std::memcpy(&cmp, &cbits, sizeof(Bits));
  Bits old = __atomic_load_n(bp, __ATOMIC_SEQ_CST);
  while (true) {
    Bits desired;
    if (op == AtomicOp::kCas) {
      if (old != cmp) break;
      desired = v;
    } else {
      T ot, vt;
      std::memcpy(&ot, &old, sizeof(T));
      std::memcpy(&vt, &v, sizeof(T));
      const T nt = apply_op<T>(op, ot, vt);
      std::memcpy(&desired, &nt, sizeof(T));
    }
    if (__atomic_compare_exchange_n(bp, &old, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) break;
  }
  uint64_t r = 0;
  std::memcpy(&r, &old, sizeof(Bits));
  return r;
}

uint64_t api_atomic(FiberCtx* c, AtomicOp op, AtomicType type, void* p, uint64_t v, uint64_t cmp, const Site* site) {
  Fiber* f = fiber_of(c);
  const uint32_t bytes = (type == AtomicType::kU64 || type == AtomicType::kF64) ? 8 : 4;
  check_access(f, reinterpret_cast<uintptr_t>(p), bytes, kAccessWrite | kAccessAligned, nullptr, site, false, "");
  const bool fp = type == AtomicType::kF32 || type == AtomicType::kF64;
  if (fp && op != AtomicOp::kAdd && op != AtomicOp::kExch && op != AtomicOp::kCas) {
    fail_at(f, site, "atomic min/max/and/or/xor on a floating-point value does not exist in CUDA");
  }
  switch (type) {
    case AtomicType::kI32: return atomic_rmw<int32_t, uint32_t>(op, p, v, cmp);
    case AtomicType::kU32: return atomic_rmw<uint32_t, uint32_t>(op, p, v, cmp);
    case AtomicType::kU64: return atomic_rmw<uint64_t, uint64_t>(op, p, v, cmp);
    case AtomicType::kF32: return atomic_rmw<float, uint32_t>(op, p, v, cmp);
    case AtomicType::kF64: return atomic_rmw<double, uint64_t>(op, p, v, cmp);
  }
  return 0;
}

void* api_static_shared(FiberCtx* c, const void* tag, uint32_t bytes, uint32_t align, const Site* site) {
  Fiber* f = fiber_of(c);
  Worker& w = *f->w;
  for (const auto& [t, off] : w.static_map) {
    if (t == tag) return w.window + off;
  }
  if (align == 0 || (align & (align - 1)) != 0) fail_at(f, site, fmt("QT_SHARED: alignment %u is not a power of two", align));
  const uint32_t off = (w.static_used + align - 1) & ~(align - 1);
  if (uint64_t{off} + bytes > kStaticSmemBytes) {
    fail_at(f, site, fmt("static shared memory exceeds 48 KiB: %u bytes in use, %u more requested", off, bytes));
  }
  // A GPU launch fails when static plus dynamic shared memory exceed the per-block limit (227 KiB on sm_90,
  // less on older parts), even though each part alone is allowed.
  if (uint64_t{off} + bytes + w.dyn_bytes > kMaxDynamicSmemBytes) {
    fail_at(f, site, fmt("static shared memory (%u bytes after this request) plus the launch's %u bytes of dynamic "
                         "shared memory exceed 227 KiB per block", off + bytes, w.dyn_bytes));
  }
  w.static_used = off + bytes;
  w.static_map.emplace_back(tag, off);
  return w.window + off;
}

void* api_dynamic_shared(FiberCtx* c) { return fiber_of(c)->w->window + kStaticSmemBytes; }

uint32_t api_cvta_shared(FiberCtx* c, const void* p, const Site* site) {
  Fiber* f = fiber_of(c);
  const uintptr_t a = reinterpret_cast<uintptr_t>(p), win = reinterpret_cast<uintptr_t>(f->w->window);
  if (a < win || a > win + kWindowBytes) {
    fail_at(f, site, "__cvta_generic_to_shared / smem_u32 of " + hex(a) + ", which is not a shared-memory address");
  }
  return static_cast<uint32_t>(a - win);
}

void api_trap(FiberCtx* c, const char* message, const Site* site) {
  fail_at(fiber_of(c), site, std::string("trap: ") + (message ? message : ""));
}

const Api* api_table() {
  static const Api api = [] {
    Api a{};
    a.abi_version = kAbiVersion;
    a.arena_lo = Arena::instance().lo();
    a.arena_span = Arena::instance().span();
    a.access = &api_access;
    a.barrier = &api_barrier;
    a.syncwarp = &api_syncwarp;
    a.shfl = &api_shfl;
    a.vote = &api_vote;
    a.ldmatrix = &api_ldmatrix;
    a.mma = &api_mma;
    a.cp_async = &api_cp_async;
    a.cp_async_commit = &api_cp_async_commit;
    a.cp_async_wait = &api_cp_async_wait;
    a.atomic = &api_atomic;
    a.static_shared = &api_static_shared;
    a.dynamic_shared = &api_dynamic_shared;
    a.cvta_shared = &api_cvta_shared;
    a.trap = &api_trap;
    return a;
  }();
  return &api;
}

// ---- fibers and blocks -----------------------------------------------------------------------------------
void on_thread_exit(Fiber* f) {
  Worker& w = *f->w;
  Warp& wp = w.warps[f->warp];
  const uint32_t bit = 1u << f->lane;
  for (const Rendezvous& r : wp.open) {
    if ((r.mask & bit) && !(r.arrived & bit)) {
      fail(f, fmt("thread exited without reaching %s (member mask 0x%08x) that other lanes wait in at %s", r.what,
                  r.mask, where(r.site).c_str()));
    }
  }
  if (w.bar_count > 0) {
    fail(f, fmt("thread exited while %u thread(s) wait at __syncthreads at %s: the barrier can never complete "
                "(divergent barrier)", w.bar_count, where(w.bar_site).c_str()));
  }
  wp.exited |= bit;
}

void fiber_main(void* arg) {
  Fiber* f = static_cast<Fiber*>(arg);
  Worker& w = *f->w;
#if QT_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
  f->started = true;
  try {
    w.L->req->entry(w.L->req->args);
    on_thread_exit(f);
  } catch (const FiberAbort&) {
  }
  f->state = State::kDone;
  ++w.done_count;
  jump(w, &f->context, nullptr, pick(w));  // never resumed: a finished fiber is not runnable again
  __builtin_unreachable();
}

std::string deadlock_report(Worker& w) {
  std::string msg = "emu: kernel " + w.L->req->kernel_name + ": block " + dim(w.block_idx) +
                    ": deadlock: no thread can run.";
  struct Group {
    Site site;
    const char* what;
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
    bool found = false;
    for (Group& g : groups) {
      if (same_site(g.site, f.wait_site) && g.what == f.wait_what) {
        ++g.count;
        found = true;
        break;
      }
    }
    if (!found) groups.push_back(Group{f.wait_site, f.wait_what, 1, t});
  }
  for (const Group& g : groups) {
    msg += fmt(" %u thread(s) wait in %s at %s (first: thread %s);", g.count, g.what, where(g.site).c_str(),
               dim(w.thread_idx(g.first)).c_str());
  }
  if (exited) msg += fmt(" %u thread(s) exited without reaching it (first: thread %s)", exited, dim(w.thread_idx(first_exited)).c_str());
  if (w.bar_count) msg += fmt(" [divergent barrier: __syncthreads at %s reached by %u of %u threads]", where(w.bar_site).c_str(), w.bar_count, w.nthreads);
  return msg;
}

void run_block(Worker& w, uint64_t b) {
  const LaunchRequest& req = *w.L->req;
  const dev::Dim3& g = req.cfg.grid;
  const dev::Dim3& bd = req.cfg.block;
  w.grid_dim = Uint3{g.x, g.y, g.z};
  w.block_dim = Uint3{bd.x, bd.y, bd.z};
  w.block_idx = Uint3{static_cast<uint32_t>(b % g.x), static_cast<uint32_t>((b / g.x) % g.y), static_cast<uint32_t>(b / (uint64_t{g.x} * g.y))};
  w.nthreads = static_cast<uint32_t>(bd.count());
  w.dyn_bytes = req.cfg.dynamic_smem_bytes;
  w.done_count = 0;
  w.bar_count = 0;
  w.static_map.clear();
  w.static_used = 0;
  w.aborted = false;
  ++w.epoch;
  w.rng = w.L->opts->seed * 0x9e3779b97f4a7c15ull + b;
  // Uninitialised shared memory: every byte 0xFF (NaN in fp16/bf16/fp32).
  std::memset(w.window, 0xFF, kStaticSmemBytes + w.dyn_bytes);
  if (w.pending_dirty) {
    std::fill(w.pending.begin(), w.pending.end(), 0);
    w.pending_dirty = false;
  }
  const uint32_t nwarps = (w.nthreads + 31) / 32;
  w.warps.assign(nwarps, Warp{});
  const uintptr_t win = reinterpret_cast<uintptr_t>(w.window);
  w.runq.clear();
  for (uint32_t t = 0; t < w.nthreads; ++t) {
    Fiber& f = w.fibers[t];
    f.state = State::kRunnable;
    f.started = false;
    f.uncommitted.clear();
    f.groups.clear();
    FiberCtx* c = f.ctx;
    c->thread_idx = w.thread_idx(t);
    c->block_idx = w.block_idx;
    c->block_dim = w.block_dim;
    c->grid_dim = w.grid_dim;
    c->smem_lo = win - kSmemGuardBytes;
    c->smem_span = kWindowBytes + 2 * kSmemGuardBytes;
    c->fiber = &f;
    make_context(&f.context, w.stacks.stack_lo(t), w.stacks.stack_hi(t), &fiber_main, &f);
#if QT_EMU_ASAN
    // A finished fiber leaves its last frames' redzones poisoned (it switches away instead of returning);
    // the next thread on this stack must start from clean shadow memory.
    __asan_unpoison_memory_region(w.stacks.stack_lo(t), static_cast<size_t>(static_cast<char*>(w.stacks.stack_hi(t)) -
                                                                            static_cast<char*>(w.stacks.stack_lo(t))));
#endif
    Warp& wp = w.warps[t / 32];
    wp.lanes[t % 32] = &f;
    wp.exists |= 1u << (t % 32);
    w.runq.push_back(&f);
  }
  while (true) {
    while (Fiber* f = pick(w)) resume(w, f);
    if (w.aborted || w.done_count == w.nthreads) break;
    record_error(w, deadlock_report(w));
  }
  if (w.aborted) {
    // Unwind every suspended thread so nothing it holds leaks; threads never started have nothing to unwind.
    for (uint32_t t = 0; t < w.nthreads; ++t) {
      Fiber& f = w.fibers[t];
      if (f.started && f.state != State::kDone) resume(w, &f);
    }
    return;
  }
  w.threads_run += w.nthreads;
  ++w.blocks_run;
}

// ---- crashes the access checks cannot see -----------------------------------------------------------------
// A fiber stack overflow (the guard pages; modules are built with -fstack-clash-protection so a big frame
// cannot jump over them) or a wild access outside the checked ranges kills the process; the handler first
// names the kernel, block and thread, then passes the signal on. Not installed under ASan, which reports
// these itself.
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

void install_crash_handler() {
#if !QT_EMU_ASAN
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

}  // namespace

struct Executor::Impl {
  std::vector<std::unique_ptr<Worker>> workers;
  std::mutex run_mu;
  uint64_t switches = 0, threads_run = 0, blocks_run = 0;
};

Executor::Executor(ExecOptions opts) : opts_(opts), impl_(std::make_unique<Impl>()) {
  if (opts_.threads == 0) {
    opts_.threads = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
  }
}

Executor::~Executor() = default;

const Api* Executor::api() const { return api_table(); }

ExecStats Executor::stats() const {
  std::lock_guard<std::mutex> lock(impl_->run_mu);
  return ExecStats{impl_->switches, impl_->threads_run, impl_->blocks_run};
}

void Executor::run(const LaunchRequest& req) {
  dev::validate_launch(req.cfg, req.kernel_name);
  std::lock_guard<std::mutex> lock(impl_->run_mu);
  Launch L;
  L.req = &req;
  L.opts = &opts_;
  L.allocs = Arena::instance().snapshot();
  L.nblocks = req.cfg.grid.count();
  const uint32_t nw = static_cast<uint32_t>(std::min<uint64_t>(opts_.threads, L.nblocks));
  while (impl_->workers.size() < nw) impl_->workers.push_back(std::make_unique<Worker>());
  install_crash_handler();
  auto work = [&L](Worker* w) {
    w->L = &L;
    tl_worker = w;
    stack_t alt{}, old_alt{};
    alt.ss_sp = w->signal_stack.data();
    alt.ss_size = w->signal_stack.size();
    ::sigaltstack(&alt, &old_alt);
#if QT_EMU_ASAN
    pthread_attr_t attr;
    void* stack_addr = nullptr;
    size_t stack_size = 0;
    pthread_getattr_np(pthread_self(), &attr);
    pthread_attr_getstack(&attr, &stack_addr, &stack_size);
    pthread_attr_destroy(&attr);
    w->sched_bottom = stack_addr;
    w->sched_size = stack_size;
#endif
    w->alloc_hint = 0;
    while (!L.failed.load(std::memory_order_relaxed)) {
      const uint64_t b = L.next_block.fetch_add(1);
      if (b >= L.nblocks) break;
      run_block(*w, b);
    }
    ::sigaltstack(&old_alt, nullptr);
    tl_worker = nullptr;
    w->L = nullptr;
  };
  if (nw == 1) {
    work(impl_->workers[0].get());
  } else {
    std::vector<std::thread> threads;
    for (uint32_t i = 0; i < nw; ++i) threads.emplace_back(work, impl_->workers[i].get());
    for (auto& t : threads) t.join();
  }
  impl_->switches = impl_->threads_run = impl_->blocks_run = 0;
  for (const auto& w : impl_->workers) {
    impl_->switches += w->switches;
    impl_->threads_run += w->threads_run;
    impl_->blocks_run += w->blocks_run;
  }
  if (L.failed.load()) throw qt::Error(L.error, kExitFailure);
}

}  // namespace qt::emu
