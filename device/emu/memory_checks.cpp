#include "device/emu/memory_checks.h"

#include <sys/mman.h>

#include <algorithm>

#include "device/emu/async_ops.h"
#include "device/emu/block_scheduler.h"
#include "device/emu/bug_reports.h"
#include "device/emu/profile.h"
#include "device/emu/symbolize.h"

namespace qt::emu::exec {
namespace {

// Written with subtractions: a wild pointer near 2^64 must not wrap a + n around into an allocation.
bool inside(const Allocation& al, uintptr_t a, uint64_t n) {
  return a >= al.base && n <= al.bytes && a - al.base <= al.bytes - n;
}

}  // namespace

Accessor accessor(const Fiber* f, bool strong, uint32_t block) {
  Worker& w = *f->w;
  Accessor a{block, w.epoch, static_cast<uint16_t>(f->warp), static_cast<uint8_t>(f->lane), strong,
             w.warps[f->warp].vc[f->lane], f->atomic_time};
  if (w.clocks.on()) {
    a.row = w.clocks.known(f->tid);
    a.vc = a.row + 32 * f->warp;
    a.sets = &w.clocks.sets;
    a.first_virtual = w.clocks.copy_warp();
    a.first_epoch = w.block_first_epoch;
  }
  if (block == kSharedBlock) a.cluster_passed = f->cluster_passed;
  return a;
}

namespace {

// A race-shadow location: the code address of an instrumented access, or an id for an API call's site.
constexpr uint64_t kSiteLoc = uint64_t{1} << 63;
uint64_t loc_in_table(Worker& w, const Site* site);
uint64_t loc_of(Worker& w, const void* code, const Site* site) {
  if (!site) return reinterpret_cast<uintptr_t>(code);
  auto& memo = w.site_memo[(site->line * 7 + site->column) % 8];
  if (memo.loc && memo.site.file == site->file && memo.site.line == site->line && memo.site.column == site->column) {
    return memo.loc;
  }
  memo.site = *site;
  memo.loc = loc_in_table(w, site);
  return memo.loc;
}

uint64_t loc_in_table(Worker& w, const Site* site) {
  Launch& L = *w.L;
  std::lock_guard<std::mutex> lock(L.site_mu);
  for (size_t i = L.sites.size(); i-- > 0 && i + 8 >= L.sites.size();) {  // the recent ones repeat
    if (same_site(L.sites[i], *site)) return kSiteLoc | i;
  }
  L.sites.push_back(*site);
  return kSiteLoc | (L.sites.size() - 1);
}

std::string loc_text(Worker& w, uint64_t loc) {
  if (loc & kSiteLoc) {
    std::lock_guard<std::mutex> lock(w.L->site_mu);
    const size_t i = static_cast<size_t>(loc & ~kSiteLoc);
    return i < w.L->sites.size() ? where(w.L->sites[i]) : std::string();
  }
  return loc ? symbolize_code_address(reinterpret_cast<const void*>(loc)) : std::string();
}

// "block (1,0,0)" for a race-shadow block id (1 + the linear index; kRemoteBlockTag where `remote`).
std::string block_name(const Worker& w, uint32_t block, bool remote) {
  const uint64_t b = (block & ~(remote ? kRemoteBlockTag : 0u)) - 1;
  const Uint3& g = w.grid_dim;
  return "block " + dim(Uint3{static_cast<uint32_t>(b % g.x), static_cast<uint32_t>((b / g.x) % g.y),
                              static_cast<uint32_t>(b / (uint64_t{g.x} * g.y))});
}

// "thread (5,0,0)", "thread (5,0,0) of block (1,0,0)", "several threads of warp 2", ... plus its line.
std::string other_accessor(Worker& w, const AccessSet& s, uint32_t own_block) {
  std::string who;
  uint32_t block = 0, tid = 0;
  if (s.block == own_block && w.clocks.on() && s.warp != kManyWarps && s.warp >= w.clocks.copy_warp()) {
    who = agent_name(w, s.warp, s.lanes);
  } else if (single_member(s, block, tid)) {
    who = "thread " + dim(w.thread_idx(tid));
    if (block != own_block) {
      const bool remote = (block & kRemoteBlockTag) && block != kManyBlocks;
      if (remote) who += " (through distributed shared memory)";
      who += " of " + block_name(w, block, remote);
    }
  } else if (s.block == kManyBlocks) {
    who = "threads of several blocks";
  } else if (s.block != own_block && (s.block & kRemoteBlockTag)) {
    who = "several threads of " + block_name(w, s.block, true) + " (through distributed shared memory)";
  } else if (s.block != own_block) {
    who = "several threads of another block";
  } else if (s.warp == kManyWarps) {
    who = "threads of several warps";
  } else {
    who = "several threads of warp " + std::to_string(s.warp);
  }
  const std::string at = loc_text(w, s.loc);
  return at.empty() ? who : who + " (at " + at + ")";
}

}  // namespace

bool smem_valid(const Worker& w, uint64_t off, uint64_t n) {
  return off + n <= w.static_used || (off >= kStaticSmemBytes && off + n <= uint64_t{kStaticSmemBytes} + w.dyn_bytes);
}

std::string smem_region(const Worker& w, uint64_t off) {
  if (off < kStaticSmemBytes) return "static shared offset " + std::to_string(off) + " (static shared size " + std::to_string(w.static_used) + ")";
  return "dynamic shared offset " + std::to_string(off - kStaticSmemBytes) + " (dynamic shared size " + std::to_string(w.dyn_bytes) + ")";
}

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

namespace {

std::string unordered_note(const Worker& w) {
  return w.clocks.on() ? "with nothing ordering the two (no __syncthreads, __syncwarp covering both, mbarrier phase "
                         "or named barrier in between)"
                       : "in the same barrier interval (no __syncthreads, or __syncwarp covering both, in between)";
}

}  // namespace

ShadowHit shadow_cells(Fiber* reporter, uint32_t off, uint32_t n, bool write, const Accessor& acc, const void* code,
                       const Site* site, const char* what) {
  return shadow_cells(reporter, *reporter->w, off, n, write, acc, code, site, what);
}

ShadowHit shadow_cells(Fiber* reporter, Worker& w, uint32_t off, uint32_t n, bool write, const Accessor& acc,
                       const void* code, const Site* site, const char* what) {
  const bool own = &w == reporter->w;
  const uint64_t loc = loc_of(*reporter->w, code, site);
  for (uint32_t i = 0; i < n; ++i) {
    Cell& c = w.shadow[off + i];
    if (uint16_t p = w.pending[off + i]; p != 0) {
      fail_access(reporter, site, code,
                  fmt("%s %s %u byte(s) at %s while a cp.async into it issued by thread %s is still pending "
                      "(missing cp_async_wait before the access, or a missing __syncthreads after it)",
                      what, write ? "writes" : "reads", n, smem_region(w, off).c_str(), dim(w.thread_idx(p - 1u)).c_str()));
    }
    if (own && !write && !w.uninit.set && (c.w.block == 0 || c.w.epoch < w.block_first_epoch)) {
      w.uninit.set = true;
      w.uninit.tid = reporter->tid;
      w.uninit.off = off;
      w.uninit.n = n;
      w.uninit.code = code;
      w.uninit.has_site = site != nullptr;
      if (site) w.uninit.site = *site;
    }
    const Conflict k = check_and_record(c, acc, write, shared_time(w), loc, nullptr);
    if (k != Conflict::kNone) return ShadowHit{k, off + i, k == Conflict::kWrite ? c.w : c.r};
  }
  return ShadowHit{};
}

std::string shared_race_message(Worker& w, const ShadowHit& hit, const char* what, bool write, bool strong, uint32_t n,
                                 uint32_t off) {
  const AccessSet& other = hit.other;
  const std::string region = smem_region(w, off);
  if (w.clocks.on() && other.warp != kManyWarps && other.warp >= w.clocks.copy_warp()) {
    const std::string agent = other_accessor(w, other, kSharedBlock);
    if (hit.conflict == Conflict::kRead) {
      return fmt("overwriting a stage still being read: %s writes %u byte(s) at %s that %s reads; a wgmma is in "
                 "flight until a wgmma_wait_group retires it, and the write must be ordered after that wait (an "
                 "mbarrier arrive and wait, a named barrier or __syncthreads after it)",
                 what, n, region.c_str(), agent.c_str());
    }
    return fmt("%s %s %u byte(s) at %s that %s writes, before the mbarrier phase it completes on was waited for "
               "(mbarrier_wait_parity, or an ordering after such a wait, is missing)",
               what, write ? "overwrites" : "reads", n, region.c_str(), agent.c_str());
  }
  if (other.block != kSharedBlock) {  // in shared memory, another block is another CTA of the cluster
    return fmt("distributed shared-memory race: %s %s %u byte(s) at %s, which %s %s with no barrier.cluster "
               "(cluster_sync) in between", what, write ? "writes" : "reads", n, smem_region(w, hit.off).c_str(),
               other_accessor(w, other, kSharedBlock).c_str(),
               hit.conflict == Conflict::kWrite ? "wrote" : "read");
  }
  return fmt("shared-memory race: %s %s %u byte(s) at %s, which %s %s %s%s", what,
             write ? (strong ? "atomically updates" : "writes") : "reads", n, smem_region(w, hit.off).c_str(),
             other_accessor(w, other, kSharedBlock).c_str(),
             hit.conflict == Conflict::kWrite ? (other.strong ? "updated atomically" : "wrote") : "read",
             unordered_note(w).c_str(),
             (other.strong != strong) ? "; an atomic and a plain access of one location race" : "");
}

std::string shared_accessor_name(Worker& w, const AccessSet& s) { return other_accessor(w, s, kSharedBlock); }

void shadow_access(Fiber* f, uint32_t off, uint32_t n, bool write, bool strong, const void* code, const Site* site,
                   const char* what) {
  const ShadowHit hit = shadow_cells(f, off, n, write, accessor(f, strong, kSharedBlock), code, site, what);
  if (hit.conflict != Conflict::kNone) {
    fail_access(f, site, code, shared_race_message(*f->w, hit, what, write, strong, n, off));
  }
}

void record_agent_write(Worker& w, uint32_t off, uint32_t n, const Accessor& agent, const Site* site) {
  const uint64_t loc = loc_of(w, nullptr, site);
  for (uint32_t i = 0; i < n; ++i) {
    Cell& c = w.shadow[off + i];
    c.r = AccessSet{};
    c.w = AccessSet{};
    check_and_record(c, agent, true, shared_time(w), loc, nullptr);
  }
}

void global_shadow_access(Fiber* f, uintptr_t a, uint32_t n, bool write, bool strong, const void* code,
                          const Site* site, const char* what) {
  Worker& w = *f->w;
  const Accessor acc = accessor(f, strong, w.block_id);
  const GlobalShadow::Hit hit = w.L->global.access(w.page_cache, a, n, acc, write, loc_of(w, code, site));
  if (hit.conflict == Conflict::kNone) return;
  const AccessSet& o = hit.other;
  const bool cross = o.block != w.block_id;
  fail_access(f, site, code,
              fmt("global-memory race: %s %s %u byte(s) at %s (byte %s: %s), which %s %s %s%s", what,
                  write ? (strong ? "atomically updates" : "writes") : "reads", n, hex(a).c_str(), hex(hit.addr).c_str(),
                  Arena::instance().describe(hit.addr).c_str(), other_accessor(w, o, w.block_id).c_str(),
                  hit.conflict == Conflict::kWrite ? (o.strong ? "updated atomically" : "wrote") : "read",
                  cross ? "in this launch (blocks are not ordered within a launch: no __threadfence of the other "
                          "block followed by an atomic of this one in between)"
                        : unordered_note(w).c_str(),
                  (o.strong != strong) ? "; an atomic and a plain access of one location race" : ""));
}

void check_access(Fiber* f, uintptr_t a, uint32_t bytes, uint32_t flags, const void* code, const Site* site,
                  const char* what) {
  Worker& w = *f->w;
  const bool write = flags & (kAccessWrite | kAccessAtomic);
  const bool strong = flags & (kAccessVolatile | kAccessAtomic);
  if ((flags & kAccessAligned) && bytes > 1 && (a % bytes) != 0) {
    fail_access(f, site, code,
                fmt("misaligned %u-byte %s at address %s (must be %u-byte aligned)", bytes, write ? "write" : "read",
                    hex(a).c_str(), bytes));
  }
  const uintptr_t win = reinterpret_cast<uintptr_t>(w.window);
  const bool shared = a >= w.window_lo() && a < w.window_hi();
  if (shared) {
    const int64_t off = static_cast<int64_t>(a) - static_cast<int64_t>(win);
    if (off < 0 || !smem_valid(w, static_cast<uint64_t>(off), bytes)) {
      fail_access(f, site, code,
                  fmt("out-of-bounds shared %s of %u byte(s) at shared offset %lld (static shared in use: %u bytes; "
                      "dynamic: %u bytes at offset %u)",
                      write ? "write" : "read", bytes, static_cast<long long>(off), w.static_used, w.dyn_bytes,
                      kStaticSmemBytes));
    }
    if (w.L->opts->race_checks) shadow_access(f, static_cast<uint32_t>(off), bytes, write, strong, code, site, what);
  } else {
    if (!global_valid(w, a, bytes)) {
      fail_access(f, site, code,
                  fmt("out-of-bounds global %s of %u byte(s) at %s: %s", write ? "write" : "read", bytes, hex(a).c_str(),
                      Arena::instance().describe(a).c_str()));
    }
    if (w.L->opts->race_checks) global_shadow_access(f, a, bytes, write, strong, code, site, what);
  }
  if (w.L->profile) profile_access(f, a, bytes, write, shared, code, site);
  if (write && !strong) note_progress(w);
  if (strong) poll_point(f, a, write, shared, code, site);
}

void mark_async_pending(Fiber* f, uint32_t off, uint32_t n) {
  Worker& w = *f->w;
  for (uint32_t i = 0; i < n; ++i) w.pending[off + i] = static_cast<uint16_t>(f->tid + 1);
  w.pending_dirty = true;
}

void record_async_write(Fiber* f, uint32_t off, uint32_t n) {
  Worker& w = *f->w;
  const Accessor acc = accessor(f, false, kSharedBlock);
  for (uint32_t i = 0; i < n; ++i) {
    w.pending[off + i] = 0;
    // The issue already checked the bytes for races: the landing only makes them count as written now.
    Cell& c = w.shadow[off + i];
    c.r = AccessSet{};
    c.w.block = acc.block;
    c.w.epoch = acc.epoch;
    c.w.clk = acc.vc[acc.lane];
    c.w.lanes = 1u << acc.lane;
    c.w.warp = acc.warp;
    c.w.strong = 0;
  }
}

void record_warp_sync(Worker& w, uint32_t warp, uint32_t mask) {
  Warp& wp = w.warps[warp];
  const uint32_t s = ++wp.serial;
  if (w.clocks.on()) {
    sync_warp_clocks(w, warp, mask, s);
    return;
  }
  uint32_t join[32];
  std::fill(join, join + 32, 0u);
  for (uint32_t m = mask; m; m &= m - 1) {
    const uint32_t* v = wp.vc[__builtin_ctz(m)];
    for (int k = 0; k < 32; ++k) join[k] = std::max(join[k], v[k]);
  }
  for (uint32_t m = mask; m; m &= m - 1) join[__builtin_ctz(m)] = s;
  for (uint32_t m = mask; m; m &= m - 1) std::copy(join, join + 32, wp.vc[__builtin_ctz(m)]);
}

void record_fence(Fiber* f) {
  Worker& w = *f->w;
  w.L->global.fence(w.block_id);
}

void reset_block_memory(Worker& w) {
  std::memset(w.window, 0xFF, kStaticSmemBytes + w.dyn_bytes);
  // Entries of an earlier block count as ordered by their older epochs, but a cluster's reads from other CTAs
  // are ordered by generation, which starts afresh with every cluster: after a cluster's block, and before
  // one, the shadow starts clean (also for a launch without clusters that follows one on this Worker).
  if (w.cluster && w.L->opts->race_checks)
    w.cluster_shadow_bytes = std::max(w.cluster_shadow_bytes, kStaticSmemBytes + w.dyn_bytes);
  if (w.cluster_shadow_bytes) {
    std::memset(static_cast<void*>(w.shadow), 0, size_t{w.cluster_shadow_bytes} * sizeof(Cell));
    if (!w.cluster) w.cluster_shadow_bytes = 0;
  }
  if (w.pending_dirty) {
    std::fill(w.pending.begin(), w.pending.end(), 0);
    w.pending_dirty = false;
  }
  w.uninit.set = false;
  w.block_first_epoch = w.epoch;
}

std::string uninit_report(const Worker& w) {
  if (!w.uninit.set) return {};
  std::string msg = "emu: kernel " + w.L->req->kernel_name + ": block " + dim(w.block_idx) + " thread " +
                    dim(w.thread_idx(w.uninit.tid)) + ": read of uninitialised shared memory: " +
                    std::to_string(w.uninit.n) + " byte(s) at " + smem_region(w, w.uninit.off) +
                    " that no thread of this block wrote before (the value is garbage on a GPU)";
  std::string at = w.uninit.has_site ? where(w.uninit.site)
                                     : (w.uninit.code ? symbolize_code_address(w.uninit.code) : std::string());
  if (!at.empty()) msg += " (at " + at + ")";
  return msg;
}

}  // namespace qt::emu::exec
