#pragma once
// The block/warp scheduler: runs the threads of one block as fibers on the Worker's host thread, picking the
// next runnable one in a seeded random order, and parks and wakes them at __syncthreads and at warp
// collectives. A block where no thread can run is a deadlock and reported as such.
#include <cstdint>

#include "device/emu/executor_state.h"

namespace qt::emu::exec {

// Runs block `b` of the Worker's launch to completion, or until a bug aborts it.
void run_block(Worker& w, uint64_t b);
// Runs thread block cluster `unit` of a cluster launch (clusters numbered x fastest over the grid) on the
// Worker's host thread: its CTAs on `lead` and lead's sibling Workers, scheduled together.
void run_cluster(Worker& lead, uint64_t unit);

// __syncthreads (and its count/and/or forms): parks `f` until every thread of the block arrives at the same
// barrier, then returns the reduced predicate.
int block_barrier(Fiber* f, BarrierKind kind, int pred, const Site* site);

// A strong (atomic or volatile) access of `a` by `f`: repeated reads of one address are a spin-wait, so the
// thread lets the others of its block run; a block whose runnable threads only spin, or that spins longer
// than the watchdog allows, ends with a report of every waiting thread.
void poll_point(Fiber* f, uintptr_t a, bool write, bool shared, const void* code, const Site* site);
// Something happened that a spinning thread may be waiting for (a write, a completed synchronisation).
void note_progress(Worker& w);

// Computes every lane's result of a collective once its last lane arrives; `last` is that lane.
using CollectiveResults = void (*)(Fiber* last, Warp& wp, const Rendezvous& r);

// A warp collective `op` over the lanes of `mask`: parks `f` until all of them arrive at the same
// collective, then `results` fills in their outputs. `aligned` collectives must also be reached at one
// call site.
void warp_collective(Fiber* f, uint32_t op, uint32_t mask, const Site* site, bool aligned, const char* what,
                     CollectiveResults results);

// Parks `f` (an mbarrier or named-barrier wait at `site`) until wake(f).
void park_async(Fiber* f, const Site* site, const char* what);
void wake(Fiber* f);

// Computes the results of a warpgroup collective once the last of its 128 threads, `last`, arrives.
using GroupResults = void (*)(Fiber* last, uint32_t group, const Site* site);

// A warpgroup-wide .aligned collective `op` (wgmma.mma_async, setmaxnreg): parks `f` until all 128 threads
// of its warpgroup (4 consecutive warps from a multiple of 4) arrive at the same call site, then `results`.
void warpgroup_collective(Fiber* f, uint32_t op, const Site* site, const char* what, GroupResults results);

}  // namespace qt::emu::exec
