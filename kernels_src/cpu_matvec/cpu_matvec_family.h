#pragma once
// The `matvec.*` host families: the CPU backend's quantized decode matvec (one activation row) for Q8_0,
// INT8 group-wise (sym/asym) and AWQ INT4 weights. Shape [N (rows, out features), K (in features), G (group)].
// Tunable: instruction set, threads and rows per work item. Verified against fp32 dequantization with double
// accumulation, with a tolerance for the int8 activation quantization the fast path uses.
#include <string>
#include <vector>

#include "kernels_src/registry/family.h"

namespace qt::kernels::cpu_matvec {

const KernelFamily& q8_0_family();
const KernelFamily& int8_sym_family();
const KernelFamily& int8_asym_family();
const KernelFamily& awq_int4_family();

std::string matvec_family_name(WeightType t);  // "matvec.q8_0", ...

// The distinct matvec shapes [N, K, G] of a model's quantized tensors, with the weight type of each.
struct MatvecShape {
  WeightType type;
  std::vector<int64_t> shape;
  std::string what;  // "attention q_proj", "mlp gate_proj", ...
};
std::vector<MatvecShape> model_matvec_shapes(const ModelWeights& w);

}  // namespace qt::kernels::cpu_matvec
