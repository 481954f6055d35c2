#pragma once
// A profile without a GPU: the emulator sees every memory instruction of every lane, so it groups the lanes'
// accesses into warp-wide requests (the k-th execution of one instruction by each lane of a warp) and counts
// what the memory system of an NVIDIA GPU would do with them:
//   shared memory: 32 banks of 4 bytes; a request takes one wavefront per distinct 4-byte word in its busiest
//     bank, per phase (8-byte accesses go in 2 phases of 16 lanes, 16-byte ones and ldmatrix matrices in 4 of
//     8), so "ways" is the worst bank's word count and extra wavefronts are the ones past one per phase;
//   global memory: 32-byte sectors touched per request, against the fewest sectors its bytes could fit in;
//   bytes loaded and stored; cp.async bytes and groups still in flight when a thread waits for them (the
//     loads a warp has in flight before their first use; for plain loads the use is not observable).
// Lanes of a warp run one after another on the emulator, so a request is complete when every live lane made
// its k-th access, or at the next barrier or the block's end for divergent code.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "device/emu/executor_state.h"
#include "device/emu/profile_counters.h"

namespace qt::emu {

namespace exec {

// Per launch: filled by the Workers, merged under a lock.
struct Profile {
  std::mutex mu;
  KernelProfile result;
};

// The Worker's pending requests and counters (allocated when a profiled launch first runs on it).
struct ProfileState;
void profile_block_start(Worker& w);
void profile_flush(Worker& w, bool block_end);  // completes pending requests (barrier, block end)
void profile_access(Fiber* f, uintptr_t a, uint32_t bytes, bool write, bool shared, const void* code, const Site* site);
void profile_cp_async(Fiber* f, uint32_t smem_off, uintptr_t src, uint32_t cp_size, uint32_t src_size, const Site* site);
void profile_cp_wait(Fiber* f, uint32_t groups, uint64_t bytes);
// One ldmatrix of a warp: the row addresses of each matrix.
void profile_ldmatrix(Worker& w, const Rendezvous& r, const uint32_t* row_addr, uint32_t matrices);
void profile_worker_done(Worker& w);  // merges the Worker's counters into the launch's profile
void profile_worker_free(Worker& w);

}  // namespace exec

}  // namespace qt::emu
