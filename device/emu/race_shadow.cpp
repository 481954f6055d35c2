#include "device/emu/race_shadow.h"

namespace qt::emu::exec {

bool ordered_before(const AccessSet& s, const Accessor& a, const FenceLog* fences) {
  if (s.block == 0) return true;
  if (s.block != a.block) {
    // Another block: only a fence of that block after the access, then an atomic of ours, orders it.
    return s.block != kManyBlocks && fences && a.atomic_time != 0 &&
           fences->fenced_between(s.block, s.time, a.atomic_time);
  }
  if (s.epoch != a.epoch) return true;  // a __syncthreads lies between
  if (s.warp != a.warp) return false;   // another warp (or several) in the same barrier interval
  // Same warp: each other member lane must have reached a __syncwarp after its access (its own clock then
  // exceeded s.clk) that happens before us.
  for (uint32_t m = s.lanes & ~(1u << a.lane); m; m &= m - 1) {
    if (a.vc[__builtin_ctz(m)] <= s.clk) return false;
  }
  return true;
}

namespace {

AccessSet single(const Accessor& a, uint32_t now, uint64_t loc) {
  AccessSet s;
  s.loc = loc;
  s.block = a.block;
  s.epoch = a.epoch;
  s.clk = a.vc[a.lane];
  s.lanes = 1u << a.lane;
  s.warp = a.warp;
  s.strong = a.strong;
  s.time = now;
  return s;
}

// Adds `a` to a set whose members are all unordered-or-earlier accesses of the same kind.
void join(AccessSet& s, const Accessor& a, uint32_t now, uint64_t loc) {
  if (s.block == 0 || (s.block == a.block && s.epoch != a.epoch)) {
    s = single(a, now, loc);  // the old members are ordered before every later access of this block anyway
    return;
  }
  if (s.block != a.block) {
    s.block = kManyBlocks;
    s.warp = kManyWarps;
  } else if (s.warp != a.warp) {
    s.warp = kManyWarps;
  } else {
    s.lanes |= 1u << a.lane;
    if (a.vc[a.lane] > s.clk) s.clk = a.vc[a.lane];
  }
  s.strong = s.strong && a.strong;
  if (now > s.time) s.time = now;
  s.loc = loc;
}

}  // namespace

Conflict check_and_record(Cell& c, const Accessor& a, bool write, uint32_t now, uint64_t loc, const FenceLog* fences) {
  // Only a plain write races: two strong accesses never do, and a plain read next to an atomic or volatile
  // write reads the old or the new value (the atomicCAS loop of the CUDA Programming Guide starts so).
  const bool plain_write = write && !a.strong;
  if ((plain_write || !c.w.strong) && !ordered_before(c.w, a, fences)) return Conflict::kWrite;
  if (!write) {
    join(c.r, a, now, loc);
    return Conflict::kNone;
  }
  if (!a.strong) {
    if (!ordered_before(c.r, a, fences)) return Conflict::kRead;
    c.r = AccessSet{};  // every reader is ordered before this write, so before all that follows it
    c.w = single(a, now, loc);
    return Conflict::kNone;
  }
  // A strong write: the readers stay (a later plain write must still meet them); strong writers of one
  // interval stay together, so a later plain access meets them all.
  if (c.w.strong && c.w.block != 0 && !(c.w.block == a.block && c.w.epoch != a.epoch)) join(c.w, a, now, loc);
  else c.w = single(a, now, loc);
  return Conflict::kNone;
}

bool single_member(const AccessSet& s, uint32_t& block, uint32_t& tid) {
  if (s.block == kManyBlocks || s.warp == kManyWarps || __builtin_popcount(s.lanes) != 1) return false;
  block = s.block;
  tid = uint32_t{s.warp} * 32 + static_cast<uint32_t>(__builtin_ctz(s.lanes));
  return true;
}

}  // namespace qt::emu::exec
