#pragma once
// qbench --report's MoE rows (issue 27, item 6): the grouped expert GEMMs of an MoE model at each token bucket
// of the report, measured the way the linear rows are (device_timer.h), beside what they replace.
//   ops:       moe_gate_up.<type> (gate and up of every routed row, SwiGLU in the epilogue) and moe_down.<type>
//              (kernels_src/moe/moe_grouped_family.cpp), at the tuner's shape with T = the bucket;
//   variants:  the tuned dispatch (the --tuned-cache store), the default point, the Hopper grouped GEMM's tuned
//              and default points on the same experts in the frag layout (kernels_src/moe_wgmma; sm_90a, else
//              the row says why not), and the experts one by one on cuBLASLt (device/blas/blas_lt.h) with fp16
//              weights dequantized once outside the timing; on a device without cuBLASLt (the emulator) that
//              row says why it is absent;
//   the tune:  the fastest verified point the store holds for the grouped family at that exact shape, so the
//              report can say whether the tuned dispatch is within 5% of the best of the space.
// What is routed, what the baseline's timed region holds and why are in the returned "method" text (kMoeMethod).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "device/api/device.h"
#include "models/core/weights.h"
#include "runtime/cli/report_measure.h"

namespace qt::rt {

// The report's "moe_grouped" object, {"method": text, "rows": [...]} (runtime/report/report_json.h), or null
// for a model without experts.
nlohmann::json bench_moe_grouped(dev::Device& device, const ModelWeights& weights, const std::string& store_prefix,
                                 const KernelBenchOptions& options);

// Top-k distinct experts per token, each token's set uniform over the experts, from one seeded stream:
// [tokens][top_k] routed ids as the gating kernel writes them.
std::vector<int32_t> seeded_routing(int64_t tokens, int64_t top_k, int64_t experts, uint64_t seed);

}  // namespace qt::rt
