#pragma once
// Dispatch by batch size, learned per linear shape. For each (device, op, weight type, shape without M) the
// tuner stores, per batch bucket M, the families that were measured there ranked fastest first; the
// crossovers (the M where the leader changes, e.g. GEMV -> tensor-core GEMM) follow from the ranking. The
// runtime reads the ranking of the bucket a batch falls in and runs its first family that can run here.
//
// The rows live in the store's dispatch table (store_schema.h). Family names in a ranking are store names
// ("cuda.awq_gemv"). A contender that is no registry family (the dequant + cuBLAS path,
// "cuda.blas.dequant_f16" for example) is stored and ranked the same way; a runtime that cannot run it takes
// the next one.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "device/winners/store_schema.h"

namespace qt::winners {

// The decode step's variants, which `qbench --choose-decode` ranks under op kDecodeStepOp at batch 1
// (runtime/cli/decode_choice.h): no kernel families, so every reader knows them by these names,
// "<device>.decode.<variant>" ("cuda.decode.fused-norm+pdl").
inline constexpr const char* kDecodeStepOp = "decode.step";
inline constexpr const char* kDecodeVariantStem = "decode.";
inline constexpr std::array<const char*, 4> kDecodeVariants = {"plain", "pdl", "fused-norm", "fused-norm+pdl"};
// The CPU's ("cpu.decode.no-prefetch"): the Q8_0 GEMM's decode with its software prefetch into L2, without it, and
// with it into L1 (runtime/cpu/q8_gemm_kernels.h, DecodePrefetch, in this order).
inline constexpr std::array<const char*, 3> kCpuDecodeVariants = {"plain", "no-prefetch", "l1-prefetch"};
// Whether a ranked name is "cpu.decode.<one of kCpuDecodeVariants>" or "<device>.decode.<one of kDecodeVariants>".
bool is_decode_variant_name(const std::string& store_name);

// The batch buckets tuned by default: 1, 2, 4, ..., 4096.
std::vector<int64_t> default_batch_buckets();

struct DispatchEntry {
  int64_t bucket = 0;            // M
  std::vector<Ranked> ranking;   // fastest first
};

// A change of leader between consecutive buckets: from `below` (fastest up to the previous bucket) to
// `above` (fastest from bucket `m` on).
struct Crossover {
  int64_t m = 0;
  std::string below, above;
};

// Entries in any order; crossovers in increasing M.
std::vector<Crossover> crossovers(std::vector<DispatchEntry> entries);

// The bucket that serves a batch of `m` rows among `buckets`: the smallest bucket >= m, else the largest.
int64_t bucket_for(const std::vector<int64_t>& buckets, int64_t m);

}  // namespace qt::winners
