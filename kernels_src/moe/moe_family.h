#pragma once
// Qwen3-MoE on the device, as kernel families (kernels_src/moe/*.cuh; CPU definitions in moe_reference.h):
//   moe_gating            router logits [M][E] -> ids, weights [M][K]                     (op moe_gating)
//   moe_init_routing      MoeInitRoutingV3: sorted rows, scatter index, token counts, expanded rows
//   moe_align             vLLM's moe_align_block_size: slots padded per expert, block -> expert
//   moe_finalize          out[t] = sum_j w[t][j] * y[rows[t*K + j]]                        (op moe_finalize)
//   moe_gate_up.<type>    grouped gate+up GEMM of every expert, SwiGLU in the epilogue     (op moe_gate_up)
//   moe_down.<type>       grouped down GEMM                                                (op moe_down)
// for <type> in q8_0, int8_sym, int8_asym, awq_int4, and int8_sym.trtllm / int8_asym.trtllm on weights in
// TensorRT-LLM's preprocessed layout (ops moe_gate_up.trtllm, moe_down.trtllm). The grouped families'
// dims are {T, E, TOPK, N, K, G}: tokens, experts, experts per token and one expert's matrix.
#include <vector>

#include "kernels_src/registry/family.h"

namespace qt::kernels::moe {

const KernelFamily& gating_family();
const KernelFamily& init_routing_family();
const KernelFamily& align_family();
const KernelFamily& finalize_family();
// moe_finalize_residual (op moe_finalize_residual): moe_finalize adding into the hidden state in place, the
// decode step's residual add with the norms fused (qrun --fuse-norm).
const KernelFamily& finalize_residual_family();
// Every grouped GEMM family, gate_up then down for each format.
const std::vector<const KernelFamily*>& grouped_families();
// The grouped family for an op ("moe_gate_up", "moe_down", or their ".trtllm" forms) and weight type.
const KernelFamily& grouped_family(const std::string& op, WeightType t);

// The routed-row buckets a model needs: T = 1, 2, 4, ... 4096 tokens of the config's experts.
std::vector<int64_t> token_buckets();

}  // namespace qt::kernels::moe
