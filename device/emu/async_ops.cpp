#include "device/emu/async_ops.h"

#include <cstring>

#include "device/emu/block_scheduler.h"
#include "device/emu/bug_reports.h"
#include "device/emu/memory_checks.h"

namespace qt::emu::exec {

namespace {

// PTX: the expected arrival count and the tx-count of an mbarrier phase stay below 2^20.
constexpr uint32_t kMbarrierLimit = (1u << 20) - 1;
// The bulk-copy virtual warp has one lane per mbarrier.
constexpr size_t kMaxMbarriers = 32;

Mbarrier* find_mbarrier(Worker& w, uint32_t addr) {
  for (Mbarrier& m : w.async.mbarriers) {
    if (m.addr == addr) return &m;
  }
  return nullptr;
}

std::string mbarrier_name(const Worker& w, const Mbarrier& m) {
  return "the mbarrier at " + smem_region(w, m.addr) + " (initialised at " + where(m.init_site) + ")";
}

// The mbarrier at `addr`, whose initialisation must be ordered before this use by `f`.
Mbarrier& use_mbarrier(Fiber* f, uint32_t addr, const Site* site, const char* what) {
  Worker& w = *f->w;
  // Whether the initialisation is still to come or only unordered depends on the schedule: one report.
  Mbarrier* m = find_mbarrier(w, addr);
  if (!m || !ordered_before(m->init, accessor(f, false, kSharedBlock), nullptr)) {
    fail_at(f, site, fmt("%s on shared address %u: no mbarrier_init of it is ordered before this use (mbarrier_init, "
                         "then a __syncthreads before other threads use it)%s",
                         what, addr, m ? (" - thread " + dim(w.thread_idx(m->init_tid)) + " initialised it at " +
                                          where(m->init_site)).c_str()
                                       : ""));
  }
  return *m;
}

void complete_phase(Worker& w, Mbarrier& m) {
  const uint16_t copies = w.clocks.copy_warp();
  learn(m.running.known.data(), copies, m.slot, 2 * m.phases + 2);
  learn(m.running.async_known.data(), copies, m.slot, 2 * m.phases + 2);
  m.done = m.running;
  ++m.phases;
  ++m.phase;
  m.pending = m.expected;
  m.tx = 0;
  size_t kept = 0;
  for (Fiber* x : m.waiters) {
    if (async_of(x).wait_parity != (m.phase & 1)) {
      acquire(w, x, m.done);
      wake(x);
    } else {
      m.waiters[kept++] = x;
    }
  }
  m.waiters.resize(kept);
  note_progress(w);
}

// A phase completes once every expected arrival came and every announced transaction byte landed.
void try_complete(Fiber* f, Mbarrier& m, const Site* site) {
  Worker& w = *f->w;
  if (m.pending != 0) return;
  if (m.tx < 0) {
    fail_at(f, site, fmt("the bulk copies completing on %s brought %d byte(s) more than its mbarrier_arrive_expect_tx "
                         "announced for phase %u",
                         mbarrier_name(w, m).c_str(), -m.tx, m.phase));
  }
  if (m.tx == 0) complete_phase(w, m);
}

// The initialising thread's fences make its initialisations so far visible to the async proxy.
void note_init_fences(Worker& w, const Fiber* f) {
  const uint32_t clock = w.clocks.known(f->tid)[32 * f->warp + f->lane];
  for (Mbarrier& m : w.async.mbarriers) {
    if (m.init_tid == f->tid && m.init_fence == 0) m.init_fence = clock;
  }
}

}  // namespace

void async_begin(Worker& w) {
  if (!w.async.used) w.async.begin(w.nthreads);
  if (!w.clocks.on()) w.clocks.enable(w);
}

void mbarrier_init(Fiber* f, uint32_t addr, uint32_t count, const Site* site) {
  Worker& w = *f->w;
  async_begin(w);
  if (addr % 8 != 0) fail_at(f, site, fmt("mbarrier_init: shared address %u is not 8-byte aligned", addr));
  if (!smem_valid(w, addr, 8)) fail_at(f, site, "mbarrier_init: out-of-bounds shared address: " + smem_region(w, addr));
  if (count == 0 || count > kMbarrierLimit) {
    fail_at(f, site, fmt("mbarrier_init: an expected arrival count of %u (PTX: 1 to 2^20 - 1)", count));
  }
  Mbarrier* m = find_mbarrier(w, addr);
  if (m && !m->waiters.empty()) {
    fail_at(f, site, fmt("mbarrier_init of %s while %zu thread(s) wait on it", mbarrier_name(w, *m).c_str(),
                         m->waiters.size()));
  }
  if (!m) {
    if (w.async.mbarriers.size() == kMaxMbarriers) {
      fail_at(f, site, fmt("mbarrier_init: the emulator tracks at most %zu mbarriers per block", kMaxMbarriers));
    }
    m = &w.async.mbarriers.emplace_back();
    m->addr = addr;
    m->slot = static_cast<uint32_t>(w.async.mbarriers.size() - 1);
  }
  m->expected = m->pending = count;
  m->tx = 0;
  m->phase = 0;
  m->init_tid = f->tid;
  m->init_site = *site;
  m->init_fence = 0;
  m->running.reset(w.clocks.width());
  m->done.reset(w.clocks.width());
  Cell init{};
  check_and_record(init, accessor(f, false, kSharedBlock), true, 0, 0, nullptr);
  m->init = init.w;
  std::memset(w.window + addr, 0, 8);
  if (w.L->opts->race_checks) shadow_access(f, addr, 8, true, false, nullptr, site, "mbarrier_init of this thread");
}

void mbarrier_arrive(Fiber* f, uint32_t addr, uint32_t tx_bytes, const Site* site) {
  Worker& w = *f->w;
  async_begin(w);
  Mbarrier& m = use_mbarrier(f, addr, site, tx_bytes ? "mbarrier_arrive_expect_tx" : "mbarrier_arrive");
  if (tx_bytes > kMbarrierLimit) {
    fail_at(f, site, fmt("mbarrier_arrive_expect_tx of %u bytes: the tx-count stays below 2^20", tx_bytes));
  }
  if (m.pending == 0) {
    fail_at(f, site, fmt("arrival on %s, whose phase %u already has all %u expected arrival(s) and waits for %d "
                         "transaction byte(s): more arrivals than mbarrier_init's count",
                         mbarrier_name(w, m).c_str(), m.phase, m.expected, m.tx));
  }
  m.tx += static_cast<int32_t>(tx_bytes);
  release_clock(w, f, release_key(ReleaseKind::kArrive, addr, m.phases));
  publish(w, f, m.running);
  --m.pending;
  try_complete(f, m, site);
}

void mbarrier_wait(Fiber* f, uint32_t addr, uint32_t parity, const Site* site) {
  Worker& w = *f->w;
  async_begin(w);
  Mbarrier& m = use_mbarrier(f, addr, site, "mbarrier_try_wait_parity");
  if (parity > 1) fail_at(f, site, fmt("mbarrier_try_wait_parity: parity %u (a phase parity is 0 or 1)", parity));
  // Parity p names the current phase when it matches its parity, else the phase before, which completed.
  if ((m.phase & 1) != parity) {
    acquire(w, f, m.done);
    return;
  }
  async_of(f).wait_parity = parity;
  m.waiters.push_back(f);
  park_async(f, site, "mbarrier_try_wait_parity");
}

void bulk_copy_g2s(Fiber* f, uint32_t dst, const void* src, uint32_t bytes, uint32_t mbar, const Site* site) {
  Worker& w = *f->w;
  async_begin(w);
  const uintptr_t s = reinterpret_cast<uintptr_t>(src);
  if (bytes == 0 || bytes % 16 != 0) {
    fail_at(f, site, fmt("cp_async_bulk_g2s: a size of %u bytes (a positive multiple of 16)", bytes));
  }
  if (dst % 16 != 0) fail_at(f, site, fmt("cp_async_bulk_g2s: shared destination %u is not 16-byte aligned", dst));
  if (s % 16 != 0) fail_at(f, site, fmt("cp_async_bulk_g2s: global source %s is not 16-byte aligned", hex(s).c_str()));
  if (!smem_valid(w, dst, bytes)) {
    fail_at(f, site, fmt("cp_async_bulk_g2s: out-of-bounds shared destination of %u bytes at %s", bytes,
                         smem_region(w, dst).c_str()));
  }
  if (!global_valid(w, s, bytes)) {
    fail_at(f, site, fmt("cp_async_bulk_g2s: out-of-bounds global source of %u bytes at %s: %s", bytes, hex(s).c_str(),
                         Arena::instance().describe(s).c_str()));
  }
  Mbarrier& m = use_mbarrier(f, mbar, site, "cp_async_bulk_g2s");
  const uint32_t init_clock = w.clocks.known(f->tid)[32 * (m.init_tid / 32) + m.init_tid % 32];
  if (m.init_fence == 0 || init_clock < m.init_fence) {
    fail_at(f, site, fmt("cp_async_bulk_g2s completes on %s, whose initialisation is not visible to the async proxy: "
                         "the initialising thread calls fence_mbarrier_init() (or fence_proxy_async_shared()) after "
                         "mbarrier_init, ordered before this copy",
                         mbarrier_name(w, m).c_str()));
  }
  for (const Mbarrier& o : w.async.mbarriers) {
    if (o.addr < dst + bytes && dst < o.addr + 8) {
      fail_at(f, site, fmt("cp_async_bulk_g2s of %u bytes to %s overwrites %s", bytes, smem_region(w, dst).c_str(),
                           mbarrier_name(w, o).c_str()));
    }
  }
  if (w.L->opts->race_checks) {
    const char* what = "the bulk copy (cp_async_bulk_g2s) of this thread";
    const ShadowHit hit = shadow_cells(f, dst, bytes, true, accessor(f, false, kSharedBlock), nullptr, site, what);
    if (hit.conflict != Conflict::kNone) fail_at(f, site, shared_race_message(w, hit, what, true, false, bytes, dst));
    global_shadow_access(f, s, bytes, false, false, nullptr, site, what);
    // From here on the bytes are the copy's: only the completion of its mbarrier phase orders them.
    uint32_t own[32] = {};
    own[m.slot] = 2 * m.phases + 1;
    const Accessor copy{kSharedBlock, w.epoch, w.clocks.copy_warp(), static_cast<uint8_t>(m.slot), false, own, 0};
    record_agent_write(w, dst, bytes, copy, site);
  }
  std::memcpy(w.window + dst, src, bytes);
  note_progress(w);
  m.tx -= static_cast<int32_t>(bytes);
  try_complete(f, m, site);
}

void named_barrier(Fiber* f, uint32_t id, uint32_t threads, bool wait, const Site* site) {
  Worker& w = *f->w;
  async_begin(w);
  const char* what = wait ? "named_barrier_sync" : "named_barrier_arrive";
  if (id == 0 || id > 15) fail_at(f, site, fmt("%s: barrier id %u (1 to 15; 0 is __syncthreads')", what, id));
  if (threads == 0 || threads % 32 != 0 || threads > w.nthreads) {
    fail_at(f, site, fmt("%s: a count of %u threads (a positive multiple of 32, at most the block's %u)", what, threads,
                         w.nthreads));
  }
  NamedBarrier& b = w.async.named[id];
  if (b.arrived == 0) {
    b.expected = threads;
    b.site = *site;
    b.released.reset(w.clocks.width());
    b.arrivals.assign((w.nthreads + 63) / 64, 0);
  } else if (b.expected != threads) {
    fail_at(f, site, fmt("%s: barrier %u with a count of %u threads, while the %u thread(s) that arrived first (at %s) "
                         "gave %u", what, id, threads, b.arrived, where(b.site).c_str(), b.expected));
  }
  uint64_t& bits = b.arrivals[f->tid / 64];
  if (bits >> (f->tid % 64) & 1) {
    fail_at(f, site, fmt("%s: this thread arrives at barrier %u a second time before it completed (%u of %u threads "
                         "arrived)", what, id, b.arrived, b.expected));
  }
  bits |= uint64_t{1} << (f->tid % 64);
  release_clock(w, f, release_key(ReleaseKind::kNamedBarrier, id, b.generation));
  publish(w, f, b.released);
  if (++b.arrived < b.expected) {
    if (wait) {
      b.waiters.push_back(f);
      park_async(f, site, "named_barrier_sync");
    }
    return;
  }
  // bar is .aligned: a warp takes part as a whole (its exited lanes aside).
  for (uint32_t warp = 0; warp < w.warps.size(); ++warp) {
    const uint32_t in = static_cast<uint32_t>(b.arrivals[warp / 2] >> (32 * (warp % 2)));
    const uint32_t need = w.warps[warp].exists & ~w.warps[warp].exited;
    if (in != 0 && (in & need) != need) {
      fail_at(f, site, fmt("%s: barrier %u completed with lanes 0x%08x of warp %u, not its lanes 0x%08x (bar.sync and "
                           "bar.arrive are .aligned: the whole warp executes them)",
                           what, id, in, warp, need));
    }
  }
  ++b.generation;
  b.arrived = 0;
  for (Fiber* x : b.waiters) {
    acquire(w, x, b.released);
    wake(x);
  }
  b.waiters.clear();
  if (wait) acquire(w, f, b.released);
  note_progress(w);
}

void fence_proxy_async(Fiber* f) {
  Worker& w = *f->w;
  async_begin(w);
  proxy_fence(w, f);
  note_init_fences(w, f);
}

void fence_mbarrier_init(Fiber* f) {
  Worker& w = *f->w;
  async_begin(w);
  release_clock(w, f, release_key(ReleaseKind::kFence, 0, async_of(f).fences++));
  note_init_fences(w, f);
}

std::string async_wait_notes(const Worker& w) {
  if (!w.async.used) return {};
  std::string notes;
  for (const Mbarrier& m : w.async.mbarriers) {
    if (m.waiters.empty()) continue;
    notes += fmt(" %s waits in phase %u for %u of %u arrival(s) and %d transaction byte(s);",
                 mbarrier_name(w, m).c_str(), m.phase, m.pending, m.expected, m.tx);
  }
  for (uint32_t id = 1; id < 16; ++id) {
    const NamedBarrier& b = w.async.named[id];
    if (!b.waiters.empty()) notes += fmt(" named barrier %u has %u of its %u threads;", id, b.arrived, b.expected);
  }
  return notes;
}

std::string agent_name(const Worker& w, uint16_t warp, uint32_t lanes) {
  if (warp == w.clocks.copy_warp()) {
    for (const Mbarrier& m : w.async.mbarriers) {
      if (lanes == 1u << m.slot) return "a bulk copy (cp_async_bulk_g2s) completing on " + mbarrier_name(w, m);
    }
    return "bulk copies (cp_async_bulk_g2s) completing on several mbarriers";
  }
  std::string groups;
  for (uint32_t m = lanes; m; m &= m - 1) groups += (groups.empty() ? "" : ", ") + std::to_string(__builtin_ctz(m));
  return "a wgmma.mma_async of warpgroup " + groups;
}

}  // namespace qt::emu::exec
