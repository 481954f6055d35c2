// Occupancy from the per-architecture limits table, checked against hand-computed cases and against the
// toolkit's own calculator (cuda_occupancy.h), fed the published per-architecture limits, over a sweep of
// registers, block sizes and shared memory.
#include <catch2/catch.hpp>

#include <cuda_occupancy.h>

#include <iterator>
#include <stdexcept>

#include "common/error.h"
#include "device/arch/arch_limits.h"

using namespace qt::compile;

namespace {

// Per-SM limits as published in the CUDA C++ Programming Guide's compute capability table ("Technical
// Specifications per Compute Capability"), written out here rather than read from qtune's ArchLimits so that
// a wrong entry there disagrees with the oracle instead of feeding it. Allocation granularities (registers
// per warp in units of 256, warps in groups of 4, shared memory in units of 128 bytes, 256 on sm_75), the
// blocks-per-SM cap and the carveout steps are not fields of cudaOccDeviceProp: cuda_occupancy.h derives
// them from the compute capability itself. The blocks-per-SM column is kept to check that it does.
struct PublishedLimits {
  int sm;
  int max_threads_per_sm;
  int max_blocks_per_sm;
  size_t smem_per_sm;             // largest shared memory carveout
  size_t smem_per_block_optin;    // what one block may opt in to
  size_t smem_reserved_per_block; // the 1 KB per block the driver keeps from compute capability 8.0 on
};

constexpr size_t kKiB = 1024;
constexpr PublishedLimits kPublished[] = {
    {75, 1024, 16, 64 * kKiB, 64 * kKiB, 0},
    {80, 2048, 32, 164 * kKiB, 163 * kKiB, 1 * kKiB},
    {86, 1536, 16, 100 * kKiB, 99 * kKiB, 1 * kKiB},
    {89, 1536, 24, 100 * kKiB, 99 * kKiB, 1 * kKiB},
    {90, 2048, 32, 228 * kKiB, 227 * kKiB, 1 * kKiB},
};
// The same on every listed architecture.
constexpr int kRegsPerSm = 65536, kRegsPerBlock = 65536, kMaxThreadsPerBlock = 1024, kWarpSize = 32;
constexpr size_t kSmemPerBlockDefault = 48 * kKiB;

const PublishedLimits& published(int sm) {
  for (const auto& p : kPublished)
    if (p.sm == sm) return p;
  FAIL("no published limits for sm_" << sm << " in this test");
  throw std::logic_error("unreachable");
}

cudaOccDeviceProp device_prop(const PublishedLimits& l) {
  cudaOccDeviceProp p;
  p.computeMajor = l.sm / 10;
  p.computeMinor = l.sm % 10;
  p.maxThreadsPerBlock = kMaxThreadsPerBlock;
  p.maxThreadsPerMultiprocessor = l.max_threads_per_sm;
  p.regsPerBlock = kRegsPerBlock;
  p.regsPerMultiprocessor = kRegsPerSm;
  p.warpSize = kWarpSize;
  p.sharedMemPerBlock = kSmemPerBlockDefault;
  p.sharedMemPerMultiprocessor = l.smem_per_sm;
  p.numSms = 100;
  p.sharedMemPerBlockOptin = l.smem_per_block_optin;
  p.reservedSharedMemPerBlock = l.smem_reserved_per_block;
  return p;
}

cudaOccResult oracle(const PublishedLimits& l, int regs, int threads, int64_t smem) {
  const cudaOccDeviceProp p = device_prop(l);
  cudaOccFuncAttributes f;
  f.maxThreadsPerBlock = kMaxThreadsPerBlock;
  f.numRegs = regs;
  f.sharedSizeBytes = 0;
  f.partitionedGCConfig = PARTITIONED_GC_OFF;
  f.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
  f.maxDynamicSharedSizeBytes = l.smem_per_block_optin;
  f.numBlockBarriers = 1;
  cudaOccDeviceState s;
  s.carveoutConfig = SHAREDMEM_CARVEOUT_MAX_SHARED;
  cudaOccResult r{};
  REQUIRE(cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &f, &s, threads, static_cast<size_t>(smem)) ==
          CUDA_OCC_SUCCESS);
  return r;
}

int oracle_blocks(const PublishedLimits& l, int regs, int threads, int64_t smem) {
  return oracle(l, regs, threads, smem).activeBlocksPerMultiprocessor;
}

}  // namespace

TEST_CASE("hand-computed occupancy cases") {
  // A100, 256 threads, 32 registers: 8 warps/block, 64 warps/SM -> 8 blocks, 100%.
  auto o = occupancy(arch_limits(80), 32, 256, 0);
  CHECK(o.blocks_per_sm == 8);
  CHECK(o.fraction == Approx(1.0));
  // A100, 128 registers: 4096 per warp, 16384 per sub-partition -> 4 warps each, 16 warps -> 2 blocks of 8.
  o = occupancy(arch_limits(80), 128, 256, 0);
  CHECK(o.blocks_per_sm == 2);
  CHECK(o.limiter == "registers");
  CHECK(o.fraction == Approx(0.25));
  // RTX 3090: 1536 threads per SM -> 6 blocks of 256 at 32 registers.
  CHECK(occupancy(arch_limits(86), 32, 256, 0).blocks_per_sm == 6);
  // sm_86, 48 KiB + 1 KiB reserved per block in 100 KiB -> 2 blocks.
  o = occupancy(arch_limits(86), 32, 128, 48 * 1024);
  CHECK(o.blocks_per_sm == 2);
  CHECK(o.limiter == "shared memory");
  // More shared memory than the per-block opt-in limit cannot launch at all.
  o = occupancy(arch_limits(86), 32, 128, 100 * 1024);
  CHECK(o.blocks_per_sm == 0);
  // Tiny blocks run into the blocks-per-SM limit (16 on sm_86, 24 on sm_89, 32 on sm_90).
  CHECK(occupancy(arch_limits(86), 16, 32, 0).blocks_per_sm == 16);
  CHECK(occupancy(arch_limits(89), 16, 32, 0).blocks_per_sm == 24);
  CHECK(occupancy(arch_limits(90), 16, 32, 0).limiter == "blocks");
  // Blocks above 1024 threads are rejected.
  CHECK(occupancy(arch_limits(90), 16, 2048, 0).blocks_per_sm == 0);
}

TEST_CASE("the published limits the oracle uses are what cuda_occupancy.h assumes") {
  for (const auto& l : kPublished) {
    INFO("sm_" << l.sm);
    // One-warp blocks with few registers and no shared memory stop only at the blocks-per-SM cap.
    CHECK(oracle_blocks(l, 16, 32, 0) == l.max_blocks_per_sm);
    CHECK((oracle(l, 16, 32, 0).limitingFactors & OCC_LIMIT_BLOCKS) != 0);
    // The whole opt-in amount fits one block; one byte more does not.
    CHECK(oracle_blocks(l, 32, 128, int64_t(l.smem_per_block_optin)) == 1);
    CHECK(oracle_blocks(l, 32, 128, int64_t(l.smem_per_block_optin) + 1) == 0);
  }
}

TEST_CASE("occupancy agrees with cuda_occupancy.h on every architecture") {
  int compared = 0;
  REQUIRE(all_arch_limits().size() == std::size(kPublished));
  for (const ArchLimits& a : all_arch_limits()) {
    const PublishedLimits& l = published(a.sm);
    for (int regs : {0, 16, 24, 32, 40, 48, 56, 64, 72, 80, 96, 100, 128, 168, 200, 255})
      for (int threads : {32, 64, 96, 128, 192, 256, 384, 512, 768, 1024})
        for (int64_t smem : {int64_t(0), int64_t(100), int64_t(4096), int64_t(9536), int64_t(15840),
                             int64_t(48 * 1024), int64_t(71936), int64_t(99 * 1024), int64_t(160 * 1024),
                             int64_t(227 * 1024)}) {
          INFO("sm_" << a.sm << " regs " << regs << " threads " << threads << " smem " << smem);
          CHECK(occupancy(a, regs, threads, smem).blocks_per_sm == oracle_blocks(l, regs, threads, smem));
          ++compared;
        }
  }
  CHECK(compared == 5 * 16 * 10 * 10);
}

TEST_CASE("architecture names parse in every accepted spelling and unknown ones are rejected") {
  CHECK(parse_arch("sm86") == 86);
  CHECK(parse_arch("sm_89") == 89);
  CHECK(parse_arch("90") == 90);
  CHECK(parse_arch("SM_90a") == 90);
  CHECK_THROWS_AS(parse_arch("sm70"), qt::Error);
  CHECK_THROWS_AS(parse_arch("ampere"), qt::Error);
  CHECK_THROWS_AS(parse_arch(""), qt::Error);
  try {
    parse_arch("sm_61");
    FAIL("sm_61 accepted");
  } catch (const qt::Error& e) {
    CHECK(e.exit_code() == qt::kExitBadInput);
    CHECK(std::string(e.what()).find("sm_61") != std::string::npos);
  }
}
