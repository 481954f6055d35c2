#include "device/emu/memory_checks.h"

#include <algorithm>

#include "device/emu/bug_reports.h"

namespace qt::emu::exec {
namespace {

// Reader markers in Shadow::r_tid besides a thread index.
constexpr uint16_t kMultiMixed = 0xFFFF;  // several readers from different warps
constexpr uint16_t kMultiWarp = 0x8000;   // | warp: several readers, all in one warp

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

// Written with subtractions: a wild pointer near 2^64 must not wrap a + n around into an allocation.
bool inside(const Allocation& al, uintptr_t a, uint64_t n) {
  return a >= al.base && n <= al.bytes && a - al.base <= al.bytes - n;
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

void shadow_access(Fiber* f, uint32_t off, uint32_t n, bool write, const void* code, const Site* site,
                   const char* what) {
  Worker& w = *f->w;
  const uint16_t me = static_cast<uint16_t>(f->tid);
  const Warp& wp = w.warps[f->warp];
  const uint16_t gen = static_cast<uint16_t>(wp.gen);
  auto race = [&](const std::string& other, const char* other_did) {
    fail_access(f, site, code,
                fmt("shared-memory race: %s %s %u byte(s) at %s, which %s %s in the same barrier interval (no "
                    "__syncthreads, or __syncwarp covering both, in between)",
                    what, write ? "writes" : "reads", n, smem_region(w, off).c_str(), other.c_str(), other_did));
  };
  for (uint32_t i = 0; i < n; ++i) {
    Shadow& s = w.shadow[off + i];
    if (uint16_t p = w.pending[off + i]; p != 0) {
      fail_access(f, site, code,
                  fmt("%s %s %u byte(s) at %s while a cp.async into it issued by thread %s is still pending "
                      "(missing cp_async_wait before the access, or a missing __syncthreads after it)",
                      what, write ? "writes" : "reads", n, smem_region(w, off).c_str(), dim(w.thread_idx(p - 1u)).c_str()));
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

void check_access(Fiber* f, uintptr_t a, uint32_t bytes, uint32_t flags, const void* code, const Site* site,
                  bool track_race, const char* what) {
  Worker& w = *f->w;
  const bool write = flags & kAccessWrite;
  if ((flags & kAccessAligned) && bytes > 1 && (a % bytes) != 0) {
    fail_access(f, site, code,
                fmt("misaligned %u-byte %s at address %s (must be %u-byte aligned)", bytes, write ? "write" : "read",
                    hex(a).c_str(), bytes));
  }
  const uintptr_t win = reinterpret_cast<uintptr_t>(w.window);
  if (a + kSmemGuardBytes >= win && a < win + kWindowBytes + kSmemGuardBytes) {
    const int64_t off = static_cast<int64_t>(a) - static_cast<int64_t>(win);
    if (off < 0 || !smem_valid(w, static_cast<uint64_t>(off), bytes)) {
      fail_access(f, site, code,
                  fmt("out-of-bounds shared %s of %u byte(s) at shared offset %lld (static shared in use: %u bytes; "
                      "dynamic: %u bytes at offset %u)",
                      write ? "write" : "read", bytes, static_cast<long long>(off), w.static_used, w.dyn_bytes,
                      kStaticSmemBytes));
    }
    if (track_race && w.L->opts->race_checks) shadow_access(f, static_cast<uint32_t>(off), bytes, write, code, site, what);
    return;
  }
  if (!global_valid(w, a, bytes)) {
    fail_access(f, site, code,
                fmt("out-of-bounds global %s of %u byte(s) at %s: %s", write ? "write" : "read", bytes, hex(a).c_str(),
                    Arena::instance().describe(a).c_str()));
  }
}

void mark_async_pending(Fiber* f, uint32_t off, uint32_t n) {
  Worker& w = *f->w;
  for (uint32_t i = 0; i < n; ++i) w.pending[off + i] = static_cast<uint16_t>(f->tid + 1);
  w.pending_dirty = true;
}

void record_async_write(Fiber* f, uint32_t off, uint32_t n) {
  Worker& w = *f->w;
  for (uint32_t i = 0; i < n; ++i) {
    w.pending[off + i] = 0;
    Shadow& s = w.shadow[off + i];
    s.w_epoch = w.epoch;
    s.w_tid = static_cast<uint16_t>(f->tid);
    s.w_gen = static_cast<uint16_t>(w.warps[f->warp].gen);
  }
}

void record_warp_sync(Warp& wp, uint32_t mask) {
  ++wp.gen;
  wp.ring[static_cast<uint16_t>(wp.gen) % 16] = {wp.gen, mask};
}

void reset_block_memory(Worker& w) {
  std::memset(w.window, 0xFF, kStaticSmemBytes + w.dyn_bytes);
  if (w.pending_dirty) {
    std::fill(w.pending.begin(), w.pending.end(), 0);
    w.pending_dirty = false;
  }
}

}  // namespace qt::emu::exec
