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
// Who `f` is to the race shadow (with the block's clocks once they are on).
Accessor accessor(const Fiber* f, bool strong, uint32_t block);
// Shared memory is the block's own: its race shadow names every block 1 (earlier blocks on this Worker
// have older epochs, so their entries count as ordered).
constexpr uint32_t kSharedBlock = 1;
// A read of another CTA's shared memory (ld.shared::cluster) is recorded in that CTA's shadow as this tag plus the
// reading block's id, so that nothing but a barrier.cluster orders it with the owner's accesses.
constexpr uint32_t kRemoteBlockTag = 0x80000000u;
// The time stamp of shared accesses in the race shadow: the cluster's generation (0 outside clusters).
inline uint32_t shared_time(const Worker& w) { return w.cluster ? w.cluster->generation : 0; }
// The first conflict of an access of [off, off + n) by `acc` (which may be an asynchronous agent) that
// shadow_cells found and recorded; a read of a pending cp.async destination is reported at once, naming
// `reporter`, which also owns a read of never-written bytes.
struct ShadowHit {
  Conflict conflict = Conflict::kNone;
  uint32_t off = 0;  // the byte
  AccessSet other;   // the set it conflicts with
};
ShadowHit shadow_cells(Fiber* reporter, uint32_t off, uint32_t n, bool write, const Accessor& acc, const void* code,
                       const Site* site, const char* what);
// The same on the shadow of `owner`, another CTA of the reporter's cluster (a distributed shared-memory read;
// reads of never-written bytes are not tracked there).
ShadowHit shadow_cells(Fiber* reporter, Worker& owner, uint32_t off, uint32_t n, bool write, const Accessor& acc,
                       const void* code, const Site* site, const char* what);
// "thread (5,0,0) (at k.cu:12)", "a bulk copy ...", "several threads of warp 2": a shared access set, named.
std::string shared_accessor_name(Worker& w, const AccessSet& s);
// The report of a shared conflict of `what` (an access of n bytes at off) with `hit.other`.
std::string shared_race_message(Worker& w, const ShadowHit& hit, const char* what, bool write, bool strong, uint32_t n,
                                uint32_t off);
// [off, off + n) now holds what agent `agent` (a bulk copy) wrote; earlier accesses are forgotten (the
// issuing thread's check covered them).
void record_agent_write(Worker& w, uint32_t off, uint32_t n, const Accessor& agent, const Site* site);
// Records a global access by `f` (a read of a cp.async source, say) in the race shadow.
void global_shadow_access(Fiber* f, uintptr_t a, uint32_t n, bool write, bool strong, const void* code,
                          const Site* site, const char* what);

// A cp.async by `f` into [off, off + n) is issued: the bytes are pending until it is waited for.
void mark_async_pending(Fiber* f, uint32_t off, uint32_t n);
// That cp.async has landed: the bytes count as written by `f` now.
void record_async_write(Fiber* f, uint32_t off, uint32_t n);
// A __syncwarp of `mask` in `warp` completed: it orders the memory accesses of those lanes before it and after it.
void record_warp_sync(Worker& w, uint32_t warp, uint32_t mask);
// A __threadfence by `f`: with a later atomic of another block it orders `f`'s earlier global accesses.
void record_fence(Fiber* f);

// Fresh shared memory for the Worker's next block: every byte uninitialised, nothing pending.
void reset_block_memory(Worker& w);
// The report of the block's first read of never-written shared memory, if any ("" if none).
std::string uninit_report(const Worker& w);

}  // namespace qt::emu::exec
