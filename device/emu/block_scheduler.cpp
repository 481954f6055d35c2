#include "device/emu/block_scheduler.h"

#include <chrono>

#include "device/emu/block_clocks.h"
#include "device/emu/bug_reports.h"
#include "device/emu/memory_checks.h"
#include "device/emu/profile.h"
#include "device/emu/cluster.h"
#include "device/emu/wgmma.h"

namespace qt::emu::exec {
namespace {

// The next thread to run, in seeded random order; null when none is runnable or the block was aborted.
Fiber* pick(Worker& w) {
  if (w.aborted || w.runq.empty()) return nullptr;
  const size_t i = w.next_random() % w.runq.size();
  Fiber* f = w.runq[i];
  w.runq[i] = w.runq.back();
  w.runq.pop_back();
  return f;
}

// Saves the running context into `from` and continues `to` (the scheduler when null). Blocked threads hand
// over directly to the next runnable one, so a barrier costs one switch per thread, not two.
void jump(Worker& w, Context* from, void** fake_stack_save, Fiber* to) {
  ++w.switches;
  w.current = to;
  if (to) {
    switch_fiber(from, fake_stack_save, to->context, to->stack);
  } else {
    switch_fiber(from, fake_stack_save, w.sched, w.sched_stack);
  }
}

void resume(Worker& w, Fiber* f) { jump(w, &w.sched, &w.sched_fake_stack, f); }

// Suspends the running fiber until it is picked again; unwinds it if the launch was aborted meanwhile.
void yield(Fiber* f) {
  Worker& w = *f->w;
  jump(w, &f->context, &f->fake_stack, pick(w));
  if (w.aborted) throw FiberAbort{};
}

void make_runnable(Worker& w, Fiber* f) {
  f->state = State::kRunnable;
  w.runq.push_back(f);
}

// Parks the running fiber in `state` until another thread makes it runnable again.
void park(Fiber* f, State state, const Site* site, const char* what) {
  f->state = state;
  f->wait_code = nullptr;
  f->wait_site = *site;
  f->wait_what = what;
  yield(f);
}

// A thread that returns while others wait for it in a collective or a barrier leaves them stuck forever.
void on_thread_exit(Fiber* f) {
  Worker& w = *f->w;
  Warp& wp = w.warps[f->warp];
  const uint32_t bit = 1u << f->lane;
  for (const Rendezvous& r : wp.open) {
    if ((r.mask & bit) && !(r.arrived & bit)) {
      fail(f, fmt("thread exited without reaching %s (member mask 0x%08x) that other lanes wait in at %s", r.what,
                  r.mask, where(r.site).c_str()));
    }
  }
  if (w.async.used) {
    const GroupRendezvous& g = w.async.groups[f->tid / 128];
    if (g.arrived > 0) {
      fail(f, fmt("thread exited without reaching %s that %u other thread(s) of its warpgroup wait in at %s", g.what,
                  g.arrived, where(g.site).c_str()));
    }
    wgmma_thread_exit(f);
  }
  if (w.bar_count > 0) {
    fail(f, fmt("thread exited while %u thread(s) wait at __syncthreads at %s: the barrier can never complete "
                "(divergent barrier)", w.bar_count, where(w.bar_site).c_str()));
  }
  // barrier.cluster waits for the threads that have not exited (PTX ISA, barrier.cluster): this one's exit may
  // be what the others wait for.
  if (w.cluster) cluster_thread_exit(f);
  wp.exited |= bit;
  note_progress(w);
}

void fiber_main(void* arg) {
  Fiber* f = static_cast<Fiber*>(arg);
  Worker& w = *f->w;
  fiber_started();
  f->started = true;
  try {
    w.L->req->entry(w.L->req->args);
    on_thread_exit(f);
  } catch (const FiberAbort&) {
  } catch (const std::exception& e) {
    record_error(w, host_failure(*w.L, e));  // the fiber's stack ends here: nothing above could catch it
  }
  f->state = State::kDone;
  if (++w.done_count == w.nthreads && w.cluster && !w.aborted) cluster_cta_exit(w);
  jump(w, &f->context, nullptr, pick(w));  // never resumed: a finished fiber is not runnable again
  __builtin_unreachable();
}

void start_block(Worker& w, uint64_t b) {
  const LaunchRequest& req = *w.L->req;
  const dev::Dim3& g = req.cfg.grid;
  const dev::Dim3& bd = req.cfg.block;
  w.grid_dim = Uint3{g.x, g.y, g.z};
  w.block_dim = Uint3{bd.x, bd.y, bd.z};
  w.block_idx = Uint3{static_cast<uint32_t>(b % g.x), static_cast<uint32_t>((b / g.x) % g.y), static_cast<uint32_t>(b / (uint64_t{g.x} * g.y))};
  w.nthreads = static_cast<uint32_t>(bd.count());
  w.dyn_bytes = req.cfg.dynamic_smem_bytes;
  w.done_count = 0;
  w.bar_count = 0;
  w.static_map.clear();
  w.static_used = 0;
  w.aborted = false;
  w.block_id = static_cast<uint32_t>(b + 1);
  w.idle_polls = 0;
  ++w.epoch;
  w.rng = w.L->opts->seed * 0x9e3779b97f4a7c15ull + b;
  w.clocks.disable();
  w.async.clear();
  reset_block_memory(w);
  const uint32_t nwarps = (w.nthreads + 31) / 32;
  w.warps.assign(nwarps, Warp{});
  if (w.L->profile) profile_block_start(w);
  w.runq.clear();
  for (uint32_t t = 0; t < w.nthreads; ++t) {
    Fiber& f = w.fibers[t];
    f.state = State::kRunnable;
    f.started = false;
    f.uncommitted.clear();
    f.groups.clear();
    f.poll_addr = 0;
    f.polls = 0;
    f.atomic_time = 0;
    f.cluster_passed = 0;
    f.wait_code = nullptr;
    FiberCtx* c = f.ctx;
    c->thread_idx = w.thread_idx(t);
    c->block_idx = w.block_idx;
    c->block_dim = w.block_dim;
    c->grid_dim = w.grid_dim;
    c->smem_lo = w.window_lo();
    c->smem_span = w.window_hi() - w.window_lo();
    c->fiber = &f;
    make_context(&f.context, w.stacks.stack_lo(t), w.stacks.stack_hi(t), &fiber_main, &f);
    forget_stack_frames(f.stack);
    Warp& wp = w.warps[t / 32];
    wp.lanes[t % 32] = &f;
    wp.exists |= 1u << (t % 32);
    w.runq.push_back(&f);
  }
}

// After the block's threads stopped: its first read of never-written shared memory, and, if the launch failed,
// every suspended thread unwound so nothing it holds leaks (threads never started have nothing to unwind).
void finish_block(Worker& w) {
  if (!w.aborted && w.uninit.set && w.L->opts->race_checks) record_error(w, uninit_report(w));
  if (w.aborted) {
    for (uint32_t t = 0; t < w.nthreads; ++t) {
      Fiber& f = w.fibers[t];
      if (f.started && f.state != State::kDone) resume(w, &f);
    }
    return;
  }
  w.threads_run += w.nthreads;
  ++w.blocks_run;
}

}  // namespace

void run_block(Worker& w, uint64_t b) {
  w.cluster = nullptr;
  w.cta_rank = 0;
  start_block(w, b);
  while (true) {
    while (Fiber* f = pick(w)) resume(w, f);
    if (w.aborted || w.done_count == w.nthreads) break;
    record_error(w, deadlock_report(w));
  }
  finish_block(w);
}

void run_cluster(Worker& lead, uint64_t unit) {
  const LaunchRequest& req = *lead.L->req;
  const dev::Dim3& g = req.cfg.grid;
  const dev::Dim3& cd = req.cfg.cluster;
  const uint32_t size = static_cast<uint32_t>(cd.count());
  const uint32_t threads = static_cast<uint32_t>(req.cfg.block.count());
  while (lead.siblings.size() + 1 < size) lead.siblings.push_back(std::make_unique<Worker>(threads));
  for (auto& sibling : lead.siblings)
    if (sibling->fibers.size() < threads) sibling = std::make_unique<Worker>(threads);
  ClusterRun& c = lead.cluster_run;
  c.ctas.clear();
  c.arrived = 0;
  c.generation = 1;
  c.exited.assign(size, 0);
  c.threads = 0;
  c.returned = 0;
  // Clusters tile the grid x fastest; a CTA's rank is its position in the cluster, x fastest (%cluster_ctarank).
  const uint64_t ncx = g.x / cd.x, ncy = g.y / cd.y;
  const uint64_t cx = unit % ncx, cy = (unit / ncx) % ncy, cz = unit / (ncx * ncy);
  for (uint32_t r = 0; r < size; ++r) {
    Worker& m = r == 0 ? lead : *lead.siblings[r - 1];
    if (r > 0) {
      m.L = lead.L;
      m.sched_stack = lead.sched_stack;
      m.alloc_hint = 0;
      for (auto& memo : m.site_memo) memo.loc = 0;
    }
    m.cluster = &c;
    m.cta_rank = r;
    c.ctas.push_back(&m);
    const uint64_t bx = cx * cd.x + r % cd.x, by = cy * cd.y + (r / cd.x) % cd.y, bz = cz * cd.z + r / (cd.x * cd.y);
    start_block(m, bx + g.x * (by + uint64_t{g.y} * bz));
    c.threads += m.nthreads;
  }
  // The CTAs take turns, each running until none of its threads can; a thread of one may wake another's.
  auto failed = [&] { return lead.L->failed.load(std::memory_order_relaxed); };
  while (true) {
    bool ran = false;
    const uint32_t first = static_cast<uint32_t>(lead.next_random() % size);
    for (uint32_t i = 0; i < size && !failed(); ++i) {
      Worker& m = *c.ctas[(first + i) % size];
      crash_scope_worker(&m);
      m.turn_over = false;
      while (Fiber* f = pick(m)) {
        resume(m, f);
        ran = true;
        if (m.turn_over) break;  // a spinner handed over: the others' turn
      }
    }
    crash_scope_worker(&lead);
    if (failed()) break;
    bool done = true;
    for (Worker* m : c.ctas) done = done && m->done_count == m->nthreads;
    if (done) break;
    if (!ran) {
      std::string report;
      for (Worker* m : c.ctas)
        if (m->done_count != m->nthreads) report += (report.empty() ? "" : " ") + deadlock_report(*m);
      record_error(lead, report + fmt(" (cluster of %u CTAs; %u thread(s) wait at barrier.cluster)", size, c.arrived));
      break;
    }
  }
  if (failed())
    for (Worker* m : c.ctas) m->aborted = true;
  for (Worker* m : c.ctas) {
    crash_scope_worker(m);
    finish_block(*m);
    if (m != &lead) {
      lead.threads_run += m->threads_run, m->threads_run = 0;
      lead.blocks_run += m->blocks_run, m->blocks_run = 0;
      lead.switches += m->switches, m->switches = 0;
    }
  }
  crash_scope_worker(&lead);
}

int block_barrier(Fiber* f, BarrierKind kind, int pred, const Site* site) {
  Worker& w = *f->w;
  if (w.bar_count == 0) {
    w.bar_site = *site;
    w.bar_kind = kind;
    w.bar_acc = kind == BarrierKind::kAnd ? 1 : 0;
  } else if (!same_site(w.bar_site, *site) || w.bar_kind != kind) {
    fail_at(f, site,
            fmt("divergent barrier: this thread reached __syncthreads while %u other thread(s) wait at the barrier at %s",
                w.bar_count, where(w.bar_site).c_str()));
  }
  switch (kind) {
    case BarrierKind::kPlain: break;
    case BarrierKind::kCount: w.bar_acc += pred != 0; break;
    case BarrierKind::kAnd: w.bar_acc = w.bar_acc && pred != 0; break;
    case BarrierKind::kOr: w.bar_acc = w.bar_acc || pred != 0; break;
  }
  if (++w.bar_count == w.nthreads) {
    // A read of never-written shared memory in the interval that just ended is now known not to be a race.
    if (w.uninit.set && w.L->opts->race_checks) {
      record_error(w, uninit_report(w));
      throw FiberAbort{};
    }
    w.bar_result = w.bar_acc;
    w.bar_count = 0;
    ++w.epoch;
    if (w.clocks.on()) sync_block_clocks(w);
    if (w.L->profile) profile_flush(w, false);
    note_progress(w);
    for (uint32_t t = 0; t < w.nthreads; ++t) {
      if (w.fibers[t].state == State::kBarrier) make_runnable(w, &w.fibers[t]);
    }
    return w.bar_result;
  }
  park(f, State::kBarrier, site, "__syncthreads");
  return w.bar_result;
}

void note_progress(Worker& w) { w.idle_polls = 0; }

void park_async(Fiber* f, const Site* site, const char* what) { park(f, State::kAsyncWait, site, what); }

void wake(Fiber* f) {
  make_runnable(*f->w, f);
  note_progress(*f->w);
}

void warpgroup_collective(Fiber* f, uint32_t op, const Site* site, const char* what, GroupResults results) {
  Worker& w = *f->w;
  const uint32_t g = f->tid / 128;
  if (128 * (g + 1) > w.nthreads) {
    fail_at(f, site, fmt("%s in warpgroup %u, which has only %u thread(s): a warpgroup is 4 whole warps (128 threads, "
                         "the first warp's index a multiple of 4)",
                         what, g, w.nthreads - 128 * g));
  }
  GroupRendezvous& r = w.async.groups[g];
  if (r.arrived == 0) {
    r.op = op;
    r.site = *site;
    r.what = what;
  } else if (r.op != op || !same_site(r.site, *site)) {
    fail_at(f, site, fmt("%s reached while %u other thread(s) of warpgroup %u wait in %s at %s (.aligned: all 128 "
                         "threads of the warpgroup must execute the same instruction)",
                         what, r.arrived, g, r.what, where(r.site).c_str()));
  }
  for (uint32_t warp = 4 * g; warp < 4 * g + 4; ++warp) {
    if (const uint32_t gone = w.warps[warp].exited) {
      fail_at(f, site, fmt("%s of warpgroup %u, whose thread %s already exited (.aligned: all 128 threads of the "
                           "warpgroup must execute it)",
                           what, g, dim(w.thread_idx(32 * warp + __builtin_ctz(gone))).c_str()));
    }
  }
  if (++r.arrived == 128) {
    r.arrived = 0;
    results(f, g, site);
    for (uint32_t t = 128 * g; t < 128 * (g + 1); ++t) {
      if (t != f->tid) make_runnable(w, &w.fibers[t]);
    }
    note_progress(w);
    return;
  }
  park(f, State::kWarp, site, what);
}

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Polls of one address in a row before a spinning thread lets the others run.
constexpr uint32_t kPollsBeforeYield = 8;

}  // namespace

void poll_point(Fiber* f, uintptr_t a, bool write, bool shared, const void* code, const Site* site) {
  Worker& w = *f->w;
  if (write) {
    note_progress(w);  // a strong write (an atomic, a volatile store) may release a spinning thread
    f->poll_addr = 0;
    return;
  }
  if (a != f->poll_addr) {
    f->poll_addr = a;
    f->polls = 1;
    return;
  }
  if (++f->polls < kPollsBeforeYield) return;
  f->polls = 0;
  f->wait_what = "a spin-wait (polling)";
  f->wait_code = code;
  f->wait_site = site ? *site : Site{};
  if (w.idle_polls++ == 0) w.spin_since = now_seconds();
  // Every runnable thread has had many turns without a write or a synchronisation in the block: nothing can
  // change the shared location the spinners read. A global flag may be set by another block, so only time
  // bounds that case.
  const double limit = w.L->opts->watchdog_seconds;
  const bool stuck = shared && w.idle_polls > 64 * (w.runq.size() + 1) + 64;
  if (stuck || (limit > 0 && (w.idle_polls & 63) == 0 && now_seconds() - w.spin_since > limit)) {
    record_error(w, no_progress_report(w, now_seconds() - w.spin_since, w.idle_polls));
    throw FiberAbort{};
  }
  // The thread spins on a location another thread must change: let the others run (a GPU runs the warps
  // of a block concurrently, so the writer makes progress there too).
  Fiber* next = pick(w);
  if (!next && !w.cluster) return;
  make_runnable(w, f);
  // In a cluster the writer may be a thread of another CTA: back to run_cluster, which turns to the next one.
  if (!next) w.turn_over = true;
  jump(w, &f->context, &f->fake_stack, next);
  if (w.aborted) throw FiberAbort{};
}

void warp_collective(Fiber* f, uint32_t op, uint32_t mask, const Site* site, bool aligned, const char* what,
                     CollectiveResults results) {
  Worker& w = *f->w;
  Warp& wp = w.warps[f->warp];
  const uint32_t bit = 1u << f->lane;
  if (!(mask & bit)) fail_at(f, site, fmt("%s with member mask 0x%08x that lacks the calling lane %u", what, mask, f->lane));
  if (mask & ~wp.exists) {
    fail_at(f, site, fmt("%s with member mask 0x%08x names lanes that do not exist (warp %u has lanes 0x%08x)", what,
                         mask, f->warp, wp.exists));
  }
  // A lane meets the lanes that pass the same member mask. Collectives with other masks may be open at the
  // same time (a half-warp shuffle while the other half already waits in a full __syncwarp): lanes that
  // truly disagree on a mask never meet and end in a deadlock, which reports the disagreement.
  Rendezvous* r = nullptr;
  for (Rendezvous& o : wp.open) {
    if (o.mask == mask && !(o.arrived & bit)) {
      r = &o;
      break;
    }
  }
  if (!r) {
    wp.open.push_back(Rendezvous{mask, 0, op, *site, what});
    r = &wp.open.back();
  } else {
    if (r->op != op) {
      fail_at(f, site, fmt("%s meets a different warp collective (%s at %s) of the same lanes", what, r->what,
                           where(r->site).c_str()));
    }
    if (aligned && !same_site(r->site, *site)) {
      fail_at(f, site, fmt("%s (.aligned) reached at a different call site than the other lanes' (%s): divergent warp",
                           what, where(r->site).c_str()));
    }
  }
  if (uint32_t gone = mask & wp.exited) {
    fail_at(f, site, fmt("%s with member mask 0x%08x, but lane %d already exited", what, mask, __builtin_ctz(gone)));
  }
  r->arrived |= bit;
  if (r->arrived == r->mask) {
    const Rendezvous done = *r;
    wp.open.erase(wp.open.begin() + (r - wp.open.data()));
    results(f, wp, done);
    for (uint32_t m = done.mask & ~bit; m; m &= m - 1) make_runnable(w, wp.lanes[__builtin_ctz(m)]);
    note_progress(w);
    return;
  }
  park(f, State::kWarp, site, what);
}

}  // namespace qt::emu::exec
