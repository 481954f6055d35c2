#pragma once
// The state of the Hopper features the executor emulates: per thread, its wgmma operations in flight and
// the registers it lent them; per block, its mbarriers, named barriers and warpgroup rendezvous. Logic in
// async_ops.cpp (mbarriers, bulk copies, named barriers, fences) and wgmma.cpp.
#include <cstdint>
#include <deque>
#include <vector>

#include "device/emu/block_clocks.h"
#include "device/emu/race_shadow.h"
#include "kernels_src/common/emu_abi.h"

namespace qt::emu::exec {

struct Fiber;

// Registers (a local array on the thread's stack) lent to a wgmma.
struct RegRange {
  uintptr_t lo = 0;
  uint32_t bytes = 0;
  bool overlaps(uintptr_t a, uint32_t n) const { return a < lo + bytes && lo < a + n; }
};

// One thread's part of an issued wgmma.mma_async: computed at issue, delivered into `d` when its commit
// group retires.
struct WgmmaInFlight {
  RegRange d, a;       // accumulator (n/2 floats); A fragment (16 bytes), empty when A came from shared memory
  uint32_t n = 0;
  uint32_t group = 0;  // commit group it belongs to: the thread's committed count at issue
  Site site{};
  float result[128];
};

struct AsyncThread {
  std::vector<WgmmaInFlight> wgmma;  // issued and not retired, oldest first
  uint32_t committed = 0, retired = 0;
  // wgmma_fence executed since the thread last touched registers it lent to a wgmma (none at the start).
  bool fenced = false;
  std::vector<RegRange> lent;  // registers of retired wgmmas: touching them calls for a new wgmma_fence
  uint32_t fences = 0;         // proxy and mbarrier-init fences so far (their releases' key)
  uint32_t wait_parity = 0;    // while parked on an mbarrier

};

struct Mbarrier {
  uint32_t addr = 0;        // shared address
  uint32_t slot = 0;        // its lane in the bulk-copy virtual warp
  uint32_t expected = 0, pending = 0;
  int32_t tx = 0;           // transaction bytes expected and not yet complete (negative: completed early)
  uint32_t phase = 0;       // the current phase since the last initialisation (its parity is what waits test)
  uint32_t phases = 0;      // phases completed since the first initialisation here (the bulk copies' clock)
  uint32_t init_tid = 0;
  Site init_site{};
  AccessSet init;           // the initialisation, which every use must be ordered after
  uint32_t init_fence = 0;  // the initialising thread's clock after its first fence following the init (0: none)
  Released running, done;   // released by arrivals so far; as of the last completed phase
  std::vector<Fiber*> waiters;
};

struct NamedBarrier {
  uint32_t expected = 0, arrived = 0, generation = 0;
  Site site{};  // of the first arrival of this generation
  Released released;
  std::vector<Fiber*> waiters;
  std::vector<uint64_t> arrivals;  // a bit per thread, this generation
};

// A warpgroup-wide .aligned collective some threads of the warpgroup have reached.
enum GroupOp : uint32_t { kGroupWgmma = 1, kGroupSetmaxnreg = 2 };
struct GroupRendezvous {
  uint32_t arrived = 0, op = 0;
  Site site{};
  const char* what = "";
};

struct AsyncBlock {
  bool used = false;  // set by the first Hopper operation of the block
  std::vector<AsyncThread> threads;  // by thread index (not in Fiber: kernels without them keep Fiber small)
  std::deque<Mbarrier> mbarriers;  // (a deque: a thread parked on one keeps its address while others are added)
  NamedBarrier named[16];
  std::vector<GroupRendezvous> groups;  // per warpgroup

  void begin(uint32_t nthreads) {
    used = true;
    threads.assign(nthreads, AsyncThread{});
    groups.assign((nthreads + 127) / 128, GroupRendezvous{});
  }
  void clear() {
    if (!used) return;
    used = false;
    mbarriers.clear();
    for (NamedBarrier& b : named) b = NamedBarrier{};
  }
};

}  // namespace qt::emu::exec
