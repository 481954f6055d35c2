#pragma once
// The decode step's variant measured per GPU and model, as the kernels are. Whether a step runs faster with its
// norms fused into the GEMVs beside them (qrun --fuse-norm) and with programmatic dependent launch (--pdl)
// depends on the GPU's launch costs, which the static model cannot know: `qbench --choose-decode` times every
// variant the device runs and keeps the ranking in the tuning store, and qrun given that store (--tuned-cache)
// runs the fastest one it can unless --fuse-norm or --pdl say otherwise.
//
// The ranking is a row of the store's dispatch table (device/winners/dispatch.h): op winners::kDecodeStepOp,
// the model's linear weight type, its shape (decode_step_key) and batch 1, each variant a ranked "family" named
// as winners::is_decode_variant_name says, with its median seconds per step. So it is read, validated, exported and shown
// (`qtune store show`) as every other dispatch row.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "device/winners/dispatch.h"
#include "device/winners/store_schema.h"
#include "device/winners/winners.h"
#include "models/core/weights.h"
#include "runtime/cpu/q8_gemm_kernels.h"

namespace qt::rt {

struct DecodeVariant {
  std::string name;  // one of winners::kDecodeVariants, or of winners::kCpuDecodeVariants on the CPU
  bool fuse_norm = false, pdl = false;
  DecodePrefetch prefetch = DecodePrefetch::kL2;  // CPU: the Q8_0 GEMM's decode prefetch (CpuOptions)
  // "fused norms + PDL": how the statistics line and qbench's table say it.
  std::string label() const;
};

// The variant of those parts, named as winners::kDecodeVariants names it.
DecodeVariant make_variant(bool fuse_norm, bool pdl);
// The CPU's variant of a decode prefetch ("plain" into L2, "no-prefetch", "l1-prefetch").
DecodeVariant make_cpu_variant(DecodePrefetch prefetch);
// The variants a device runs: fused norms on the emulator and every GPU, PDL on a CUDA GPU of sm_90 or later;
// on the CPU, the decode prefetch into L2, none, or into L1.
std::vector<DecodeVariant> decode_variants(const std::string& device, int arch);
// The variant of a store name ("cuda.decode.fused-norm+pdl" with prefix "cuda.", "cpu.decode.no-prefetch" with
// "cpu."); with prefix "", a name of either list (qrun --decode). nullopt for any other name.
std::optional<DecodeVariant> variant_of(const std::string& store_name, const std::string& prefix);

// What a ranking is stored under: the model's linear weight type (its experts' for an MoE model) and its shape
// (layers, hidden size, heads, KV heads, head dim, MLP width, experts, experts per token, vocabulary), which
// decide the step's launches and bytes.
// The type of a model's linear layers: its experts' for an MoE model, else its projections'.
WeightType model_linear_type(const ModelWeights& weights);

struct DecodeStepKey {
  std::string weight_type;
  std::vector<int64_t> shape;
};
DecodeStepKey decode_step_key(const ModelWeights& weights);

struct MeasuredVariant {
  DecodeVariant variant;
  double seconds_per_step = 0;  // median over the repetitions
};
// Replaces the ranking of `key` on `device` in the store at `path` (created when missing) with `measured`,
// fastest first. Throws qt::Error naming the file when it is no qtune store or cannot be written.
void store_decode_ranking(const std::string& path, const winners::DeviceFingerprint& device, const std::string& prefix,
                          const DecodeStepKey& key, std::vector<MeasuredVariant> measured);

// Throws qt::Error (exit 2) naming the store when a ranking could not be written to it: checked before the
// measurement, so that its minutes are not lost to a path that cannot take the result.
void check_decode_store_writable(const std::string& path);

// The stored ranking's fastest variant among `runnable`, with a line saying so for the statistics; nullopt
// when the store holds no ranking for this device and model.
struct StoredDecodeChoice {
  DecodeVariant variant;
  std::string line;  // "decode step: fused norms + PDL, measured fastest of 4 by qbench --choose-decode"
};
std::optional<StoredDecodeChoice> stored_decode_choice(const winners::WinnersTable& table,
                                                       const winners::DeviceFingerprint& device,
                                                       const std::string& prefix, const DecodeStepKey& key,
                                                       const std::vector<DecodeVariant>& runnable);

}  // namespace qt::rt
