#include "device/emu/profile.h"

#include <algorithm>
#include <deque>
#include <unordered_map>

#include "device/emu/bug_reports.h"
#include "device/emu/symbolize.h"

namespace qt::emu {

void MemCounters::add(const MemCounters& o) {
  requests += o.requests;
  lane_accesses += o.lane_accesses;
  bytes += o.bytes;
  wavefronts += o.wavefronts;
  ideal_wavefronts += o.ideal_wavefronts;
  max_ways = std::max(max_ways, o.max_ways);
  sectors += o.sectors;
  ideal_sectors += o.ideal_sectors;
}

void KernelProfile::merge(const KernelProfile& o) {
  if (kernel.empty()) kernel = o.kernel;
  launches += o.launches;
  blocks += o.blocks;
  shared_loads.add(o.shared_loads);
  shared_stores.add(o.shared_stores);
  global_loads.add(o.global_loads);
  global_stores.add(o.global_stores);
  cp_async_bytes += o.cp_async_bytes;
  cp_waits += o.cp_waits;
  cp_inflight_groups += o.cp_inflight_groups;
  cp_inflight_bytes += o.cp_inflight_bytes;
  for (const SiteProfile& s : o.sites) {
    auto it = std::find_if(sites.begin(), sites.end(), [&](const SiteProfile& x) { return x.where == s.where && x.kind == s.kind; });
    if (it == sites.end()) sites.push_back(s);
    else it->c.add(s.c);
  }
}

void shared_wavefronts(const std::vector<LaneAccess>& lanes, uint64_t& wavefronts, uint64_t& ideal, uint32_t& ways) {
  wavefronts = ideal = 0;
  ways = 0;
  if (lanes.empty()) return;
  const uint32_t size = lanes.front().size;
  const uint32_t phase_lanes = size <= 4 ? 32 : 128 / std::min<uint32_t>(size, 16);
  for (uint32_t p = 0; p * phase_lanes < 32; ++p) {
    uint64_t words[32][32];
    uint32_t count[32] = {};
    bool any = false;
    for (const LaneAccess& la : lanes) {
      if (la.lane / phase_lanes != p) continue;
      any = true;
      for (uint64_t wd = la.addr / 4; wd <= (la.addr + la.size - 1) / 4; ++wd) {
        const uint32_t bank = static_cast<uint32_t>(wd % 32);
        bool seen = false;
        for (uint32_t i = 0; i < count[bank]; ++i) seen = seen || words[bank][i] == wd;
        if (!seen && count[bank] < 32) words[bank][count[bank]++] = wd;
      }
    }
    if (!any) continue;
    const uint32_t worst = std::max<uint32_t>(1, *std::max_element(count, count + 32));
    wavefronts += worst;
    ideal += 1;
    ways = std::max(ways, worst);
  }
}

void global_sectors(const std::vector<LaneAccess>& lanes, uint64_t& sectors, uint64_t& ideal) {
  std::vector<std::pair<uint64_t, uint64_t>> iv;
  std::vector<uint64_t> secs;
  for (const LaneAccess& la : lanes) {
    iv.emplace_back(la.addr, la.addr + la.size);
    for (uint64_t s = la.addr / 32; s <= (la.addr + la.size - 1) / 32; ++s) secs.push_back(s);
  }
  std::sort(secs.begin(), secs.end());
  sectors = static_cast<uint64_t>(std::unique(secs.begin(), secs.end()) - secs.begin());
  std::sort(iv.begin(), iv.end());
  uint64_t unique = 0, end = 0;
  for (const auto& [lo, hi] : iv) {
    const uint64_t from = std::max(lo, end);
    if (hi > from) unique += hi - from;
    end = std::max(end, hi);
  }
  ideal = (unique + 31) / 32;
}

namespace exec {
namespace {

enum Kind : uint8_t { kSharedLoad, kSharedStore, kGlobalLoad, kGlobalStore, kLdmatrix, kCpShared, kCpGlobal };
const char* kKindNames[] = {"shared load", "shared store", "global load", "global store", "ldmatrix",
                            "cp.async shared", "cp.async global"};

struct Bucket {
  uint32_t lanes = 0;
  std::vector<LaneAccess> acc;
};

struct PcState {
  uint32_t count[32] = {};
  uint64_t base = 0;  // occurrence index of open.front()
  std::deque<Bucket> open;
  size_t site = 0;
  Kind kind = kSharedLoad;
  bool named = false;
};

}  // namespace

struct ProfileState {
  std::vector<std::unordered_map<uint64_t, PcState>> warps;
  KernelProfile kp;
  std::vector<std::pair<uint64_t, const void*>> site_keys;  // per kp.sites entry: key and code address
  std::unordered_map<uint64_t, size_t> site_of;
};

namespace {

ProfileState& state(Worker& w) {
  if (!w.prof) w.prof = new ProfileState;
  return *w.prof;
}

uint64_t key_of(const void* code, const Site* site, Kind kind) {
  uint64_t k = site ? (reinterpret_cast<uintptr_t>(site->file) * 0x9e3779b97f4a7c15ull) ^ (uint64_t{site->line} << 20) ^ site->column
                    : reinterpret_cast<uintptr_t>(code);
  return k * 8 + kind;
}

size_t site_index(ProfileState& ps, uint64_t key, const void* code, const Site* site, Kind kind) {
  auto it = ps.site_of.find(key);
  if (it != ps.site_of.end()) return it->second;
  SiteProfile sp;
  sp.kind = kKindNames[kind];
  if (site) sp.where = where(*site);
  ps.kp.sites.push_back(sp);
  ps.site_keys.emplace_back(key, site ? nullptr : code);
  ps.site_of[key] = ps.kp.sites.size() - 1;
  return ps.kp.sites.size() - 1;
}

MemCounters& category(KernelProfile& kp, Kind k) {
  switch (k) {
    case kSharedLoad:
    case kLdmatrix: return kp.shared_loads;
    case kSharedStore:
    case kCpShared: return kp.shared_stores;
    case kGlobalLoad:
    case kCpGlobal: return kp.global_loads;
    default: return kp.global_stores;
  }
}

void finish(ProfileState& ps, const PcState& pc, const Bucket& b) {
  if (b.acc.empty()) return;
  MemCounters c;
  c.requests = 1;
  c.lane_accesses = b.acc.size();
  for (const LaneAccess& la : b.acc) c.bytes += la.size;
  if (pc.kind == kSharedLoad || pc.kind == kSharedStore || pc.kind == kCpShared) {
    shared_wavefronts(b.acc, c.wavefronts, c.ideal_wavefronts, c.max_ways);
  } else {
    global_sectors(b.acc, c.sectors, c.ideal_sectors);
  }
  ps.kp.sites[pc.site].c.add(c);
  category(ps.kp, pc.kind).add(c);
}

void record(Fiber* f, uint64_t addr, uint32_t size, Kind kind, const void* code, const Site* site) {
  Worker& w = *f->w;
  ProfileState& ps = state(w);
  const uint64_t key = key_of(code, site, kind);
  PcState& pc = ps.warps[f->warp][key];
  if (!pc.named) {
    pc.site = site_index(ps, key, code, site, kind);
    pc.kind = kind;
    pc.named = true;
  }
  const uint64_t k = pc.count[f->lane]++;
  if (k < pc.base) return;  // its request was completed early (flushed at a barrier)
  while (pc.open.size() <= k - pc.base) pc.open.emplace_back();
  Bucket& b = pc.open[k - pc.base];
  b.lanes |= 1u << f->lane;
  b.acc.push_back(LaneAccess{f->lane, addr, size});
  const Warp& wp = w.warps[f->warp];
  const uint32_t live = wp.exists & ~wp.exited;
  while (!pc.open.empty() && (pc.open.front().lanes & live) == live) {
    finish(ps, pc, pc.open.front());
    pc.open.pop_front();
    ++pc.base;
  }
}

}  // namespace

void profile_block_start(Worker& w) {
  ProfileState& ps = state(w);
  ps.warps.assign((w.nthreads + 31) / 32, {});
  ++ps.kp.blocks;
}

void profile_flush(Worker& w, bool block_end) {
  ProfileState& ps = state(w);
  for (auto& warp : ps.warps) {
    for (auto& [key, pc] : warp) {
      for (const Bucket& b : pc.open) finish(ps, pc, b);
      pc.base += pc.open.size();
      pc.open.clear();
      // Lanes behind the others (divergence) continue at the common count after a barrier.
      const uint64_t top = *std::max_element(pc.count, pc.count + 32);
      pc.base = std::max<uint64_t>(pc.base, top);
      for (uint32_t& c : pc.count) c = static_cast<uint32_t>(std::max<uint64_t>(c, pc.base));
    }
    if (block_end) warp.clear();
  }
}

void profile_access(Fiber* f, uintptr_t a, uint32_t bytes, bool write, bool shared, const void* code, const Site* site) {
  const Kind kind = shared ? (write ? kSharedStore : kSharedLoad) : (write ? kGlobalStore : kGlobalLoad);
  record(f, a, bytes, kind, code, site);
}

void profile_cp_async(Fiber* f, uint32_t smem_off, uintptr_t src, uint32_t cp_size, uint32_t src_size, const Site* site) {
  record(f, smem_off, cp_size, kCpShared, nullptr, site);
  if (src_size > 0) record(f, src, src_size, kCpGlobal, nullptr, site);
  state(*f->w).kp.cp_async_bytes += src_size;
}

void profile_cp_wait(Fiber* f, uint32_t groups, uint64_t bytes) {
  ProfileState& ps = state(*f->w);
  ++ps.kp.cp_waits;
  ps.kp.cp_inflight_groups += groups;
  ps.kp.cp_inflight_bytes += bytes;
}

void profile_ldmatrix(Worker& w, const Rendezvous& r, const uint32_t* row_addr, uint32_t matrices) {
  ProfileState& ps = state(w);
  const uint64_t key = key_of(nullptr, &r.site, kLdmatrix);
  const size_t si = site_index(ps, key, nullptr, &r.site, kLdmatrix);
  MemCounters c;
  c.requests = 1;
  for (uint32_t m = 0; m < matrices; ++m) {
    std::vector<LaneAccess> rows;
    for (uint32_t i = 0; i < 8; ++i) rows.push_back(LaneAccess{i, row_addr[8 * m + i], 16});
    uint64_t wf = 0, ideal = 0;
    uint32_t ways = 0;
    shared_wavefronts(rows, wf, ideal, ways);
    c.wavefronts += wf;
    c.ideal_wavefronts += ideal;
    c.max_ways = std::max(c.max_ways, ways);
    c.lane_accesses += 8;
    c.bytes += 128;
  }
  ps.kp.sites[si].c.add(c);
  ps.kp.shared_loads.add(c);
}

void profile_worker_done(Worker& w) {
  if (!w.prof || !w.L->profile) return;
  ProfileState& ps = *w.prof;
  profile_flush(w, true);
  for (size_t i = 0; i < ps.kp.sites.size(); ++i) {
    if (ps.kp.sites[i].where.empty()) {
      const void* code = ps.site_keys[i].second;
      ps.kp.sites[i].where = code ? symbolize_code_address(code) : std::string("?");
      if (ps.kp.sites[i].where.empty()) ps.kp.sites[i].where = "?";
    }
  }
  {
    std::lock_guard<std::mutex> lock(w.L->profile->mu);
    w.L->profile->result.merge(ps.kp);
  }
  profile_worker_free(w);
}

void profile_worker_free(Worker& w) {
  delete w.prof;
  w.prof = nullptr;
}

}  // namespace exec
}  // namespace qt::emu
