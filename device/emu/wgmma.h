#pragma once
// wgmma.mma_async (m64nNk16, f16/bf16 inputs, f32 accumulator) on the emulator: a warpgroup collective that
// reads its shared-memory operands through their descriptors as the async proxy, computes the product
// exactly (double, one rounding to fp32) and delivers it into each thread's accumulator when the commit
// group retires. Until then the accumulator and the A fragment are lent: touching them is reported, and so
// is a write to the shared memory the wgmma reads (race shadow, as a virtual warp).
#include <cstdint>

#include "device/emu/executor_state.h"

namespace qt::emu::exec {

// wgmma_desc's operands: alignment and range (the descriptor cannot hold what these checks reject).
void check_wgmma_desc(Fiber* f, uint32_t smem_addr, uint32_t lbo, uint32_t sbo, int swizzle, const Site* site);
void wgmma_issue(Fiber* f, const WgmmaCall& call, const Site* site);
void wgmma_fence(Fiber* f);
void wgmma_commit(Fiber* f);
void wgmma_wait(Fiber* f, uint32_t pending_allowed);
// An access by `f` that the hooks forwarded because it lies in the range widened to its lent registers
// (FiberCtx::smem_lo): true, after checking it, unless it is a shared or global access.
bool lent_register_access(Fiber* f, uintptr_t a, uint32_t n, bool write, const void* code);
// `f` returns: nothing may be left in flight.
void wgmma_thread_exit(Fiber* f);
// setmaxnreg: a warpgroup-wide .aligned no-op (both halves check the count at compile time).
void setmaxnreg(Fiber* f, const Site* site);

}  // namespace qt::emu::exec
