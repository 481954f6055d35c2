#include "device/emu/race_shadow.h"

#include <algorithm>

namespace qt::emu::exec {

namespace {

// With the block's clocks on (block_clocks.h): are the accesses of `lanes` of `warp`, made at clocks up to
// `clk` in barrier interval `epoch`, ordered before `a` (one block)?
bool members_ordered_with_clocks(uint16_t warp, uint32_t epoch, uint32_t lanes, uint32_t clk, const Accessor& a) {
  // A __syncthreads in between orders the threads, but neither an asynchronous agent still in flight nor a
  // generic write before a read by the async proxy.
  if (epoch != a.epoch && (epoch < a.first_epoch || (warp < a.first_virtual && !a.async_proxy))) return true;
  // Each other member lane must have released a clock newer than its access that reached us: through a
  // __syncwarp for our warp, through the block's clocks for another.
  const uint32_t* vc = warp == a.warp ? a.vc : a.row + 32 * uint32_t{warp};
  for (uint32_t m = lanes & ~(warp == a.warp ? 1u << a.lane : 0u); m; m &= m - 1) {
    if (vc[__builtin_ctz(m)] <= clk) return false;
  }
  return true;
}

[[gnu::noinline]] bool ordered_with_clocks(const AccessSet& s, const Accessor& a) {
  if (s.warp == kManyWarps) {
    // A set an earlier block left in a reused shared slot (blocks of a host thread run one after another): its
    // tag names that block's warp sets, cleared since and reused by this block's, so it must not be read.
    if (s.epoch < a.first_epoch) return true;
    // (An untagged fold of several warps dates from before the clocks were on: only a __syncthreads orders it.)
    return (s.clk & WarpSets::kTag) ? a.sets->ordered(s.clk, a) : s.epoch != a.epoch;
  }
  return members_ordered_with_clocks(s.warp, s.epoch, s.lanes, s.clk, a);
}

}  // namespace

bool ordered_before(const AccessSet& s, const Accessor& a, const FenceLog* fences) {
  if (s.block == 0) return true;
  if (s.block != a.block) {
    // Another CTA of a cluster, in shared memory: a barrier.cluster completed after the access and passed by the
    // accessor. Its arrive and wait are one call, so no thread accesses between its arrival and the completion.
    if (a.cluster_passed != 0 && s.time < a.cluster_passed) return true;
    // Another block: only a fence of that block after the access, then an atomic of ours, orders it.
    return s.block != kManyBlocks && fences && a.atomic_time != 0 &&
           fences->fenced_between(s.block, s.time, a.atomic_time);
  }
  if (a.row) return ordered_with_clocks(s, a);
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

// `a` joins the members of its own warp in `s`.
void add_lane(AccessSet& s, const Accessor& a) {
  s.lanes |= 1u << a.lane;
  if (a.vc[a.lane] > s.clk) s.clk = a.vc[a.lane];
}

// What every member shares: strong only if all are, the newest time and location.
void note_newest(AccessSet& s, const Accessor& a, uint32_t now, uint64_t loc) {
  s.strong = s.strong && a.strong;
  if (now > s.time) s.time = now;
  s.loc = loc;
}

// join with the block's clocks on: members ordered before `a` (also through mbarriers or named barriers) make
// way for it, and a set spanning several warps keeps each warp's members (WarpSets).
[[gnu::noinline]] void join_with_clocks(AccessSet& s, const Accessor& a, uint32_t now, uint64_t loc,
                                        const FenceLog* fences) {
  if (s.block == 0 || ordered_before(s, a, fences)) {
    s = single(a, now, loc);
    return;
  }
  if (s.block != a.block) {
    s.block = kManyBlocks;
    s.warp = kManyWarps;
  } else if (s.warp == a.warp) {
    add_lane(s, a);
  } else if (s.warp != kManyWarps || (s.clk & WarpSets::kTag)) {
    s.clk = a.sets->join(s, a);
    s.warp = kManyWarps;
    s.lanes = 0;
  }
  note_newest(s, a, now, loc);
}

// Adds `a` to a set whose members are all unordered-or-earlier accesses of the same kind.
void join(AccessSet& s, const Accessor& a, uint32_t now, uint64_t loc, const FenceLog* fences) {
  if (a.sets) {
    join_with_clocks(s, a, now, loc, fences);
    return;
  }
  if (s.block == 0 || (s.block == a.block && s.epoch != a.epoch) || (s.block != a.block && ordered_before(s, a, fences))) {
    s = single(a, now, loc);  // the old members are ordered before every later access of this block anyway
    return;
  }
  if (s.block != a.block) {
    s.block = kManyBlocks;
    s.warp = kManyWarps;
  } else if (s.warp != a.warp) {
    s.warp = kManyWarps;
  } else {
    add_lane(s, a);
  }
  note_newest(s, a, now, loc);
}

}  // namespace

Conflict check_and_record(Cell& c, const Accessor& a, bool write, uint32_t now, uint64_t loc, const FenceLog* fences) {
  // Only a plain write races: two strong accesses never do, and a plain read next to an atomic or volatile
  // write reads the old or the new value (the atomicCAS loop of the CUDA Programming Guide starts so).
  const bool plain_write = write && !a.strong;
  if ((plain_write || !c.w.strong) && !ordered_before(c.w, a, fences)) return Conflict::kWrite;
  if (!write) {
    join(c.r, a, now, loc, fences);
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
  if (c.w.strong && c.w.block != 0 && !(c.w.block == a.block && c.w.epoch != a.epoch)) join(c.w, a, now, loc, fences);
  else c.w = single(a, now, loc);
  return Conflict::kNone;
}

bool single_member(const AccessSet& s, uint32_t& block, uint32_t& tid) {
  if (s.block == kManyBlocks || s.warp == kManyWarps || __builtin_popcount(s.lanes) != 1) return false;
  block = s.block;
  tid = uint32_t{s.warp} * 32 + static_cast<uint32_t>(__builtin_ctz(s.lanes));
  return true;
}

uint32_t WarpSets::join(const AccessSet& s, const Accessor& a) {
  const uint32_t clk = a.vc[a.lane];
  const uint32_t from = s.warp == kManyWarps ? s.clk : 0;  // tagged (join's caller checks)
  Memo& memo = memo_[(from * 31 + a.warp * 7 + a.lane + clk) % 64];
  if (from != 0 && memo.from == from && memo.warp == a.warp && memo.lane == a.lane && memo.clk == clk &&
      memo.epoch == a.epoch) {
    return memo.to;
  }
  std::vector<Member> members;
  if (from != 0) {
    for (const Member& m : sets_[(from & ~kTag) - 1]) {
      if (!members_ordered_with_clocks(m.warp, m.epoch, m.lanes, m.clk, a)) members.push_back(m);
    }
  } else {
    members.push_back(Member{s.epoch, s.lanes, s.clk, s.warp});
  }
  bool merged = false;
  for (Member& m : members) {
    if (m.warp == a.warp && m.epoch == a.epoch) {
      m.lanes |= 1u << a.lane;
      m.clk = m.clk > clk ? m.clk : clk;
      merged = true;
    }
  }
  if (!merged) members.push_back(Member{a.epoch, 1u << a.lane, clk, a.warp});
  const uint32_t to = intern(members);
  if (from != 0) memo = Memo{from, clk, a.epoch, to, a.warp, a.lane};
  return to;
}

uint32_t WarpSets::intern(std::vector<Member>& members) {
  std::sort(members.begin(), members.end(), [](const Member& x, const Member& y) {
    return x.warp != y.warp ? x.warp < y.warp : x.epoch < y.epoch;
  });
  uint64_t h = 0xcbf29ce484222325ull;
  for (const Member& m : members) {
    for (uint64_t v : {uint64_t{m.warp}, uint64_t{m.epoch}, uint64_t{m.lanes}, uint64_t{m.clk}}) {
      h = (h ^ v) * 0x100000001b3ull;
    }
  }
  for (auto [it, end] = by_hash_.equal_range(h); it != end; ++it) {
    if (sets_[it->second - 1] == members) return it->second | kTag;
  }
  sets_.push_back(members);
  const uint32_t id = static_cast<uint32_t>(sets_.size());
  by_hash_.emplace(h, id);
  return id | kTag;
}

bool WarpSets::ordered(uint32_t tagged_id, const Accessor& a) const {
  for (const Member& m : sets_[(tagged_id & ~kTag) - 1]) {
    if (!members_ordered_with_clocks(m.warp, m.epoch, m.lanes, m.clk, a)) return false;
  }
  return true;
}

void WarpSets::clear() {
  sets_.clear();
  by_hash_.clear();
  for (Memo& m : memo_) m = Memo{};
}

}  // namespace qt::emu::exec
