#pragma once
// The sm_90 synchronisation the executor emulates besides wgmma: mbarriers (arrive, expect_tx, parity
// waits), 1-D bulk copies global -> shared that complete on an mbarrier, named barriers, the proxy and
// mbarrier-init fences. Each entry checks the kernel's use and orders memory through the block's clocks
// (block_clocks.h); a bulk copy lands at once and is ordered before its readers only by the mbarrier phase it
// completes, so reading it earlier is a race whatever the schedule.
#include <cstdint>
#include <string>

#include "device/emu/executor_state.h"

namespace qt::emu::exec {

// The block's first sm_90 operation: its clocks and async state come on.
void async_begin(Worker& w);

void mbarrier_init(Fiber* f, uint32_t mbar, uint32_t count, const Site* site);
// An arrive (tx_bytes 0) or arrive.expect_tx.
void mbarrier_arrive(Fiber* f, uint32_t mbar, uint32_t tx_bytes, const Site* site);
// Returns once the phase of `parity` completed (parking the thread until then).
void mbarrier_wait(Fiber* f, uint32_t mbar, uint32_t parity, const Site* site);
void bulk_copy_g2s(Fiber* f, uint32_t smem_dst, const void* src, uint32_t bytes, uint32_t mbar, const Site* site);
void named_barrier(Fiber* f, uint32_t id, uint32_t threads, bool wait, const Site* site);
void fence_proxy_async(Fiber* f);
void fence_mbarrier_init(Fiber* f);

// What the block's mbarriers and named barriers still wait for (appended to deadlock reports).
std::string async_wait_notes(const Worker& w);
// An asynchronous agent of the race shadow: a virtual warp of the block's clocks and its lanes.
std::string agent_name(const Worker& w, uint16_t warp, uint32_t lanes);

}  // namespace qt::emu::exec
