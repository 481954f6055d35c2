#pragma once
// Memory checking for kernel accesses: global accesses must lie inside one live allocation, shared accesses
// inside the block's static and dynamic shared memory, aligned where the compiler assumed alignment; shared
// bytes are shadowed to find races within a barrier interval and reads of cp.async data not yet waited for.
// Every block starts with its shared memory filled with 0xFF (NaN in fp16, bf16 and fp32), so a read of
// uninitialised data shows up in the results.
#include <cstdint>
#include <string>

#include "device/emu/executor_state.h"

namespace qt::emu::exec {

// Is [off, off + n) inside the shared memory the block has (static in use, or the launch's dynamic)?
bool smem_valid(const Worker& w, uint64_t off, uint64_t n);
std::string smem_region(const Worker& w, uint64_t off);  // names a shared offset for a report
// Is [a, a + n) inside one live allocation of the launch?
bool global_valid(Worker& w, uintptr_t a, uint64_t n);

// Checks one access of thread `f` (kAccessWrite / kAccessAligned flags) and, for shared memory with
// `track_race`, records it in the race shadow. A bug is reported at `site`, else at code address `code`;
// `what` names the accessor in race reports.
void check_access(Fiber* f, uintptr_t a, uint32_t bytes, uint32_t flags, const void* code, const Site* site,
                  bool track_race, const char* what);
// Records a shared access of [off, off + n) by `f` in the race shadow, reporting a race or a read of a
// pending cp.async destination.
void shadow_access(Fiber* f, uint32_t off, uint32_t n, bool write, const void* code, const Site* site,
                   const char* what);

// A cp.async by `f` into [off, off + n) is issued: the bytes are pending until it is waited for.
void mark_async_pending(Fiber* f, uint32_t off, uint32_t n);
// That cp.async has landed: the bytes count as written by `f` now.
void record_async_write(Fiber* f, uint32_t off, uint32_t n);
// A __syncwarp of `mask` completed: it orders the shared accesses of those lanes before it and after it.
void record_warp_sync(Warp& wp, uint32_t mask);

// Fresh shared memory for the Worker's next block: every byte uninitialised, nothing pending.
void reset_block_memory(Worker& w);

}  // namespace qt::emu::exec
