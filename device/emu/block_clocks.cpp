#include "device/emu/block_clocks.h"

#include <algorithm>
#include <cstring>

#include "device/emu/executor_state.h"

namespace qt::emu::exec {

namespace {

constexpr uint32_t kVirtualWarps = 2;  // bulk copies, wgmma reads

void join_row(uint32_t* dst, const uint32_t* src, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) dst[i] = std::max(dst[i], src[i]);
}

}  // namespace

void BlockClocks::enable(Worker& w) {
  nwarps_ = static_cast<uint32_t>(w.warps.size());
  width_ = (nwarps_ + kVirtualWarps) * 32;
  rows_.assign(size_t{w.nthreads} * 2 * width_, 0);
  for (uint32_t t = 0; t < w.nthreads; ++t) {
    const uint32_t warp = t / 32;
    std::memcpy(known(t) + 32 * warp, w.warps[warp].vc[t % 32], sizeof(w.warps[warp].vc[0]));
  }
  sets.clear();
  on_ = true;
}

void release_clock(Worker& w, Fiber* f, uint64_t key) {
  Warp& wp = w.warps[f->warp];
  uint32_t& own = w.clocks.known(f->tid)[32 * f->warp + f->lane];
  if (wp.release_key == key && wp.release_serial > own) {
    own = wp.release_serial;
    return;
  }
  own = ++wp.serial;
  wp.release_key = key;
  wp.release_serial = own;
}

void publish(Worker& w, const Fiber* f, Released& r) {
  const uint32_t n = w.clocks.width();
  join_row(r.known.data(), w.clocks.known(f->tid), n);
  join_row(r.async_known.data(), w.clocks.async_known(f->tid), n);
}

void acquire(Worker& w, const Fiber* f, const Released& r) {
  const uint32_t n = w.clocks.width();
  join_row(w.clocks.known(f->tid), r.known.data(), n);
  join_row(w.clocks.async_known(f->tid), r.async_known.data(), n);
}

void proxy_fence(Worker& w, Fiber* f) {
  release_clock(w, f, release_key(ReleaseKind::kFence, 0, async_of(f).fences++));
  join_row(w.clocks.async_known(f->tid), w.clocks.known(f->tid), w.clocks.width());
}

void sync_block_clocks(Worker& w) {
  BlockClocks& c = w.clocks;
  const uint32_t n = c.width();
  std::vector<uint32_t> all(2 * n, 0);
  for (uint32_t t = 0; t < w.nthreads; ++t) join_row(all.data(), c.known(t), 2 * n);
  for (uint32_t t = 0; t < w.nthreads; ++t) std::memcpy(c.known(t), all.data(), 2 * n * sizeof(uint32_t));
}

void sync_warp_clocks(Worker& w, uint32_t warp, uint32_t mask, uint32_t serial) {
  BlockClocks& c = w.clocks;
  const uint32_t n = c.width();
  std::vector<uint32_t> all(2 * n, 0);
  for (uint32_t m = mask; m; m &= m - 1) join_row(all.data(), c.known(32 * warp + __builtin_ctz(m)), 2 * n);
  for (uint32_t m = mask; m; m &= m - 1) all[32 * warp + __builtin_ctz(m)] = serial;
  for (uint32_t m = mask; m; m &= m - 1) {
    std::memcpy(c.known(32 * warp + __builtin_ctz(m)), all.data(), 2 * n * sizeof(uint32_t));
  }
}

}  // namespace qt::emu::exec
