#pragma once
// Vector clocks over every thread of a block, for the synchronisation that orders some warps of a block but
// not all of it: mbarrier phases, named barriers, and the asynchronous agents (bulk copies, wgmma) whose
// accesses only their completion orders. Off, and free, until a block first uses one of these (or a proxy
// fence); until then __syncthreads epochs and per-warp __syncwarp clocks order everything (race_shadow.h).
//
// Thread t's row holds what t knows: entry 32 w + l is the newest clock of lane l of warp w that happens
// before t's current point. Lanes of one warp take their clocks from that warp's serial counter, as for
// __syncwarp; a release by a lane (an arrive, a named barrier, a proxy fence) advances its own clock, and
// the lanes of a warp doing the same release share one new value, so that a warp's members fold into one
// newest clock. A second row holds what t knows through the async proxy: what a fence.proxy.async made
// visible to wgmma. Two virtual warps follow the real ones: the bulk copies (lane = mbarrier slot, clock
// 2 phase + 1 while the copy's phase is pending, 2 phase + 2 once it completed) and the wgmma reads of shared
// memory (lane = warpgroup, clock 2 group + 1 while commit group `group` is in flight, 2 group + 2 retired).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "device/emu/race_shadow.h"

namespace qt::emu::exec {

struct Worker;
struct Fiber;

// What releases put into an mbarrier phase or a named barrier, for the threads that acquire it.
struct Released {
  std::vector<uint32_t> known, async_known;
  void reset(uint32_t width) {
    known.assign(width, 0);
    async_known.assign(width, 0);
  }
};

class BlockClocks {
 public:
  bool on() const { return on_; }
  // Turns the clocks on for the block the Worker runs; rows start from the warps' __syncwarp clocks.
  void enable(Worker& w);
  void disable() {
    if (!on_) return;
    on_ = false;
    sets.clear();
  }
  uint32_t width() const { return width_; }
  uint16_t copy_warp() const { return static_cast<uint16_t>(nwarps_); }
  uint16_t wgmma_warp() const { return static_cast<uint16_t>(nwarps_ + 1); }
  uint32_t* known(uint32_t tid) { return rows_.data() + std::size_t{tid} * 2 * width_; }
  uint32_t* async_known(uint32_t tid) { return known(tid) + width_; }

  WarpSets sets;  // the block's multi-warp access sets (race_shadow.h)

 private:
  bool on_ = false;
  uint32_t nwarps_ = 0, width_ = 0;
  std::vector<uint32_t> rows_;
};

// Each needs the clocks on (enable first).
// A release by `f`: accesses `f` made before it are ordered before whoever acquires what it publishes. Its
// key names the release (kind, object, generation): lanes of a warp doing the same one share the new clock.
enum class ReleaseKind : uint64_t { kArrive = 1, kNamedBarrier = 2, kFence = 3 };
inline uint64_t release_key(ReleaseKind kind, uint32_t object, uint32_t generation) {
  return (static_cast<uint64_t>(kind) << 56) | (uint64_t{object} << 32) | generation;
}
void release_clock(Worker& w, Fiber* f, uint64_t key);
void publish(Worker& w, const Fiber* f, Released& r);
void acquire(Worker& w, const Fiber* f, const Released& r);
// fence.proxy.async by `f`: a release whose knowledge (of every thread's writes it is ordered after) the
// async proxy now shares.
void proxy_fence(Worker& w, Fiber* f);
// A __syncthreads: every thread knows what any knew.
void sync_block_clocks(Worker& w);
// A __syncwarp of `mask` in `warp` that got serial `serial`.
void sync_warp_clocks(Worker& w, uint32_t warp, uint32_t mask, uint32_t serial);
// An agent's clock `clock` (virtual warp `warp`, lane `lane`) becomes known through `row`.
inline void learn(uint32_t* row, uint16_t warp, uint32_t lane, uint32_t clock) {
  uint32_t& e = row[32 * uint32_t{warp} + lane];
  if (clock > e) e = clock;
}

}  // namespace qt::emu::exec
