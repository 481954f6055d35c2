#pragma once
// The state the executor's parts share while a launch runs (internal to device/emu): a Worker per host
// thread, which runs one block at a time; a Fiber per CUDA thread of that block; the warps' open
// collectives; the shared-memory window with its race shadow. The scheduler, the memory checks, the device
// API and the bug reports all work on these, always from the Worker's own host thread.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "device/emu/arena.h"
#include "device/emu/async_state.h"
#include "device/emu/block_clocks.h"
#include "device/emu/executor.h"
#include "device/emu/fiber.h"
#include "device/emu/global_shadow.h"
#include "device/emu/race_shadow.h"
#include "kernels_src/common/emu_abi.h"

namespace qt::emu::exec {

// Shared memory: static allocations from offset 0, dynamic shared memory from kStaticSmemBytes. The window
// is surrounded by inaccessible guard bands so that a near miss reaches the bounds check (see FiberCtx).
constexpr uint32_t kStaticSmemBytes = 48 * 1024;
constexpr uint32_t kMaxDynamicSmemBytes = 227 * 1024;
constexpr uint32_t kWindowBytes = ((kStaticSmemBytes + kMaxDynamicSmemBytes) + 4095) & ~4095u;
constexpr uintptr_t kSmemGuardBytes = 64 * 1024;
constexpr uint32_t kMaxThreads = 1024;

// Thrown inside a fiber to unwind it once the launch has failed; caught at the bottom of the fiber.
struct FiberAbort {};

// kAsyncWait: parked on an mbarrier phase or a named barrier, woken by whoever completes it.
enum class State : uint8_t { kRunnable, kBarrier, kWarp, kAsyncWait, kDone };

// A cp.async copy that is issued but not yet waited for.
struct CpCopy {
  uint32_t dst_off;
  const uint8_t* src;
  uint32_t cp_size, src_size;
};

struct Worker;
struct Profile;
struct ProfileState;

struct Fiber {
  Context context;
  FiberCtx* ctx = nullptr;
  Worker* w = nullptr;
  StackExtent stack;
  void* fake_stack = nullptr;  // AddressSanitizer's handle while suspended
  uint32_t tid = 0, lane = 0, warp = 0;
  State state = State::kDone;
  bool started = false;
  Site wait_site{};
  const char* wait_what = "";
  const void* wait_code = nullptr;  // where a spinning thread polls (wait_site unknown)
  // Spin-wait detection: strong (volatile or atomic) accesses of one address in a row.
  uintptr_t poll_addr = 0;
  uint32_t polls = 0;
  uint32_t atomic_time = 0;  // launch time of this thread's newest atomic (race_shadow.h)
  uint32_t cluster_passed = 0;  // in a cluster: the generation its last barrier.cluster started (ClusterRun)
  std::vector<CpCopy> uncommitted;
  std::deque<std::vector<CpCopy>> groups;
  // A warp collective's operands and result: every lane parks its input here, the last lane to arrive
  // computes all lanes' outputs.
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
    const WgmmaCall* wgmma;
  } in{};
  union {
    uint64_t v;
    uint32_t r[4];
    float d[4];
  } out{};
};

// A warp collective some lanes of `mask` have reached; `op` tells collectives apart (see device_api.cpp).
struct Rendezvous {
  uint32_t mask, arrived, op;
  Site site;
  const char* what;
};

struct Warp {
  Fiber* lanes[32] = {};
  uint32_t exists = 0, exited = 0;
  std::vector<Rendezvous> open;
  // What orders memory accesses within a warp: each completed __syncwarp gets the next serial; vc[l][k] is
  // the newest serial of lane k that happens before lane l's current point (race_shadow.h).
  uint32_t serial = 0;
  uint32_t vc[32][32] = {};
  // The last release of a lane with the block's clocks on (block_clocks.h): lanes doing the same one share
  // its serial.
  uint64_t release_key = 0;
  uint32_t release_serial = 0;
};

// One launch, shared by the Workers running its blocks.
struct Launch {
  const LaunchRequest* req = nullptr;
  std::vector<Allocation> allocs;
  uint64_t nblocks = 0;
  std::atomic<uint64_t> next_block{0};
  std::atomic<bool> failed{false};
  std::mutex err_mu;
  std::string error;
  const ExecOptions* opts = nullptr;
  GlobalShadow global;  // global-memory race shadow of this launch
  std::mutex site_mu;
  std::deque<Site> sites;  // source sites of race-shadow entries made through the API (see site_loc)
  Profile* profile = nullptr;  // observation of memory instructions, when asked for
};

// A thread block cluster being run (sm_90): its CTAs, each the block of one Worker, run on one host thread as
// one scheduling unit, so that their threads can wait for each other (barrier.cluster) and read each other's
// shared memory (ld.shared::cluster) as on a GPU, where a cluster's CTAs are co-resident on one GPC. The lead
// Worker (rank 0) owns the others' Workers.
struct ClusterRun {
  std::vector<Worker*> ctas;  // by rank (%cluster_ctarank)
  uint32_t threads = 0;       // in all its CTAs
  uint32_t returned = 0;      // threads that have exited: barrier.cluster waits for the others only (PTX)
  uint32_t arrived = 0;       // threads waiting at barrier.cluster
  // 1 + the barrier.cluster completions so far: the time stamp of the cluster's shared-memory accesses, so that
  // an access of one CTA is ordered before one of another when a barrier completed in between (race_shadow.h).
  uint32_t generation = 1;
  Site site{};
  std::vector<uint8_t> exited;  // by rank: every thread of that CTA has returned (its shared memory is gone)
};

struct Worker {
  // Fibers for blocks of up to `max_threads` threads (each fiber's stack costs the process a few memory maps,
  // of which Linux allows 65,530: a cluster's sibling Workers are made for the launch's block size).
  explicit Worker(uint32_t max_threads = kMaxThreads);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  Launch* L = nullptr;
  StackPool stacks;
  std::vector<Fiber> fibers;
  Context sched;
  StackExtent sched_stack;
  void* sched_fake_stack = nullptr;
  std::vector<Fiber*> runq;
  uint64_t rng = 0;
  void* mapping = nullptr;
  uint8_t* window = nullptr;
  Cell* shadow = nullptr;          // per shared byte (mapped lazily: only touched pages cost memory)
  std::vector<uint16_t> pending;  // per shared byte: 1 + the thread whose cp.async into it is pending
  bool pending_dirty = false;
  uint32_t epoch = 0;  // barrier interval, for the race shadow; never repeats on this Worker
  uint32_t block_first_epoch = 0;  // the block's first interval: shared bytes written before are garbage
  uint32_t block_id = 0;           // 1 + linear index of the block being run
  // The first read of never-written shared memory in this block, reported at the next barrier or the
  // block's end unless a race on the same bytes is found first (so the report does not depend on order).
  struct {
    bool set = false;
    uint32_t tid = 0, off = 0, n = 0;
    const void* code = nullptr;
    Site site{};
    bool has_site = false;
  } uninit;
  // Spin-waits: strong polls that yielded since the block last made progress (a write or a completed
  // synchronisation); past a bound every runnable thread is spinning and nothing can change.
  uint64_t idle_polls = 0;
  double spin_since = 0;  // steady-clock seconds when idle polling began
  GlobalShadow::PageCache page_cache;
  struct {
    Site site;
    uint64_t loc;
  } site_memo[8] = {};  // recent API sites and their race-shadow ids (memory_checks.cpp)
  ProfileState* prof = nullptr;  // profile.h, while a profiled launch runs
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
  BlockClocks clocks;  // the block's cross-warp clocks, once it uses mbarriers, named barriers or async agents
  // Cluster launches: the cluster this block belongs to (null in a launch without clusters) and its rank there.
  // A lead Worker owns the Workers of its cluster's other CTAs and the ClusterRun.
  ClusterRun* cluster = nullptr;
  uint32_t cta_rank = 0;
  std::vector<std::unique_ptr<Worker>> siblings;
  ClusterRun cluster_run;
  // A cluster CTA's thread that spins with nothing else of its CTA runnable hands the host thread back to
  // run_cluster, so that the other CTAs (which a GPU runs at the same time) get their turn.
  bool turn_over = false;
  // Shared bytes whose race shadow may hold a cluster's entries (ordered by generation, not by epoch): cleared
  // before this Worker's next block, cluster or not.
  uint32_t cluster_shadow_bytes = 0;
  AsyncBlock async;    // its mbarriers, named barriers and warpgroup rendezvous

  uint64_t next_random() {  // splitmix64
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // The shared window with its guard bands (FiberCtx::smem_lo).
  uintptr_t window_lo() const { return reinterpret_cast<uintptr_t>(window) - kSmemGuardBytes; }
  uintptr_t window_hi() const { return reinterpret_cast<uintptr_t>(window) + kWindowBytes + kSmemGuardBytes; }
  Uint3 thread_idx(uint32_t tid) const {
    return Uint3{tid % block_dim.x, (tid / block_dim.x) % block_dim.y, tid / (block_dim.x * block_dim.y)};
  }
};

inline Fiber* fiber_of(FiberCtx* c) { return static_cast<Fiber*>(c->fiber); }

// A thread's wgmma state (async_state.h), once its block uses sm_90 operations.
inline AsyncThread& async_of(const Fiber* f) { return f->w->async.threads[f->tid]; }

inline bool same_site(const Site& a, const Site& b) {
  return a.line == b.line && a.column == b.column && (a.file == b.file || std::strcmp(a.file, b.file) == 0);
}

}  // namespace qt::emu::exec
