#pragma once
// The `cpu` device's tunable kernels: the CPU backend's quantized matvec (runtime/cpu, decode: one
// activation row) for Q8_0, INT8 group-wise (sym/asym) and AWQ INT4 weights. Tunable: instruction set,
// thread count and rows per work item; constraint: rows_per_task * threads <= rows rounded up (otherwise
// threads stay idle by construction). Shape = [N (rows, out features), K (in features), G (group)].
// Measured for real on this machine; verified against the backend's reference path (fp32 dequantization,
// double accumulation) with a tolerance for the int8 activation quantization the fast path uses.
#include <memory>
#include <string>
#include <vector>

#include "models/core/weights.h"
#include "tuner/family/family.h"

namespace qt::tune {

std::string cpu_matvec_family_name(WeightType t);  // "cpu.matvec.q8_0", ...
// Registers the cpu matvec families (idempotent).
void register_cpu_families();

// Matvec shapes [N, K, G] a model needs (deduplicated, with the weight type of each).
struct MatvecShape {
  WeightType type;
  std::vector<int64_t> shape;
  std::string what;  // "layer q/k/v/o", "ffn gate/up", ...
};
std::vector<MatvecShape> model_matvec_shapes(const ModelWeights& w);

// The device fingerprint of this CPU.
struct DeviceFingerprint;
DeviceFingerprint cpu_fingerprint();

}  // namespace qt::tune
