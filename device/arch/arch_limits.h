#pragma once
// Per-architecture execution limits and the occupancy they imply. Values: CUDA C++ Programming Guide,
// "Technical Specifications per Compute Capability"; allocation granularities and the register/shared
// memory rules: the toolkit's cuda_occupancy.h (which the tests use as an independent oracle).
#include <cstdint>
#include <string>
#include <vector>

namespace qt::compile {

struct ArchLimits {
  int sm = 0;                          // 86 for sm_86
  const char* example = "";            // a GPU of this architecture, for messages
  int example_sms = 0;                 // its SM count, to express a grid in waves
  int max_threads_per_sm = 0;
  int max_threads_per_block = 1024;
  int max_blocks_per_sm = 0;
  int regs_per_sm = 65536;
  int regs_per_block = 65536;
  int max_regs_per_thread = 255;       // what ptxas can allocate
  int reg_alloc_unit = 256;            // registers are granted per warp in units of this many
  int sub_partitions = 4;              // registers live in 4 per-scheduler files
  int64_t smem_per_sm = 0;             // largest carveout, including the driver's per-block reservation
  int64_t smem_per_block_default = 48 * 1024;  // without the opt-in attribute
  int64_t smem_per_block_optin = 0;    // with cudaFuncAttributeMaxDynamicSharedMemorySize
  int64_t smem_reserved_per_block = 0; // driver-reserved shared memory per block (sm_80+)
  int smem_alloc_unit = 128;
  int warp_size = 32;
  int max_warps_per_sm() const { return max_threads_per_sm / warp_size; }
};

// The architectures qtune compiles for; sm_75 is included for families that allow it.
const std::vector<ArchLimits>& all_arch_limits();
const ArchLimits& arch_limits(int sm);  // throws qt::Error naming the arch if unknown
// "sm86", "sm_86", "86", "sm_86a" -> 86; throws qt::Error on anything else.
int parse_arch(const std::string& text);
std::string arch_name(int sm);  // "sm_86"

struct Occupancy {
  int blocks_per_sm = 0;  // 0 = the block cannot run at all
  int warps_per_sm = 0;
  double fraction = 0.0;  // active warps / max warps
  std::string limiter;    // "warps", "registers", "shared memory", "blocks", or why it cannot run
  int64_t smem_per_block = 0;  // allocated (static + dynamic + reserved, rounded to the unit)
};

// Occupancy of a kernel using `registers` per thread, `threads` per block and `smem_bytes` of shared memory
// (static + dynamic) per block; the dynamic part may use the opt-in limit.
Occupancy occupancy(const ArchLimits& arch, int registers, int threads, int64_t smem_bytes);

}  // namespace qt::compile
