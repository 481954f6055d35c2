#pragma once
// Memory checking for kernel accesses: global accesses must lie inside one live allocation, shared accesses
// inside the block's static and dynamic shared memory, aligned where the compiler assumed alignment. Shared
// and global bytes are shadowed (race_shadow.h) to find races, reads of never-written shared memory and
// reads of cp.async data not yet waited for. Every block starts with its shared memory filled with 0xFF
// (NaN in fp16, bf16 and fp32).
#include <cstdint>
#include <string>

#include "device/emu/executor_state.h"

namespace qt::emu::exec {

// Flags of check_access beyond emu_abi.h's: the access is an atomic read-modify-write.
constexpr uint32_t kAccessAtomic = 0x100;

// Is [off, off + n) inside the shared memory the block has (static in use, or the launch's dynamic)?
bool smem_valid(const Worker& w, uint64_t off, uint64_t n);
std::string smem_region(const Worker& w, uint64_t off);  // names a shared offset for a report
// Is [a, a + n) inside one live allocation of the launch?
bool global_valid(Worker& w, uintptr_t a, uint64_t n);

// Checks one access of thread `f` (kAccess* flags) and records it in the race shadow. A bug is reported at
// `site`, else at code address `code`; `what` names the accessor in race reports.
void check_access(Fiber* f, uintptr_t a, uint32_t bytes, uint32_t flags, const void* code, const Site* site,
                  const char* what);
// Records a shared access of [off, off + n) by `f` in the race shadow, reporting a race or a read of a
// pending cp.async destination.
void shadow_access(Fiber* f, uint32_t off, uint32_t n, bool write, bool strong, const void* code, const Site* site,
                   const char* what);
// Records a global access by `f` (a read of a cp.async source, say) in the race shadow.
void global_shadow_access(Fiber* f, uintptr_t a, uint32_t n, bool write, bool strong, const void* code,
                          const Site* site, const char* what);

// A cp.async by `f` into [off, off + n) is issued: the bytes are pending until it is waited for.
void mark_async_pending(Fiber* f, uint32_t off, uint32_t n);
// That cp.async has landed: the bytes count as written by `f` now.
void record_async_write(Fiber* f, uint32_t off, uint32_t n);
// A __syncwarp of `mask` completed: it orders the memory accesses of those lanes before it and after it.
void record_warp_sync(Warp& wp, uint32_t mask);
// A __threadfence by `f`: with a later atomic of another block it orders `f`'s earlier global accesses.
void record_fence(Fiber* f);

// Fresh shared memory for the Worker's next block: every byte uninitialised, nothing pending.
void reset_block_memory(Worker& w);
// The report of the block's first read of never-written shared memory, if any ("" if none).
std::string uninit_report(const Worker& w);

}  // namespace qt::emu::exec
