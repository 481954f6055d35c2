#pragma once
// embedding.<type>: y[M][N] = fp16(dequantized row tokens[m] of the [V][N] table) for every WeightType, one
// family per type named by its short name (embedding.f32 ... embedding.awq_int4), all from embedding.cuh.
// Dims {M, N, V} (tokens, dim, vocab), plus G (the group size) for quantized types.
#include <vector>

#include "kernels_src/registry/family.h"

namespace qt::kernels::embedding {

const KernelFamily& family(WeightType t);
// One per WeightType, in the enum's order.
const std::vector<const KernelFamily*>& families();

}  // namespace qt::kernels::embedding
