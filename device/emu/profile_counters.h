#pragma once
// What the emulator's profile counts per kernel (see profile.h for how), and the request arithmetic it
// uses: public so that tools print it and tests check it on requests known by construction.
#include <cstdint>
#include <string>
#include <vector>

namespace qt::emu {

// Counters of one instruction (source line) or of a whole kernel.
struct MemCounters {
  uint64_t requests = 0;        // warp-wide requests
  uint64_t lane_accesses = 0;
  uint64_t bytes = 0;
  uint64_t wavefronts = 0, ideal_wavefronts = 0;  // shared
  uint32_t max_ways = 0;                          // shared: worst bank conflict of one request
  uint64_t sectors = 0, ideal_sectors = 0;        // global
  void add(const MemCounters& o);
};

struct SiteProfile {
  std::string where;  // "file.cu:42"
  std::string kind;   // "shared load", "global store", "ldmatrix", "cp.async global", ...
  MemCounters c;
};

struct KernelProfile {
  std::string kernel;
  uint64_t launches = 0, blocks = 0;
  MemCounters shared_loads, shared_stores, global_loads, global_stores;
  uint64_t cp_async_bytes = 0;         // global -> shared through cp.async
  uint64_t cp_waits = 0;               // cp_async_wait calls by threads
  uint64_t cp_inflight_groups = 0;     // summed over waits: committed groups outstanding at the wait
  uint64_t cp_inflight_bytes = 0;      // summed over waits
  std::vector<SiteProfile> sites;      // by instruction, in first-seen order
  void merge(const KernelProfile& o);
};

// Pure request arithmetic, exposed for tests: wavefronts (and worst ways) of one shared request, and the
// sectors of one global request. `lanes` holds each active lane's address; all accesses are `size` bytes.
struct LaneAccess {
  uint32_t lane;
  uint64_t addr;
  uint32_t size;
};
void shared_wavefronts(const std::vector<LaneAccess>& lanes, uint64_t& wavefronts, uint64_t& ideal, uint32_t& ways);
void global_sectors(const std::vector<LaneAccess>& lanes, uint64_t& sectors, uint64_t& ideal);

}  // namespace qt::emu
