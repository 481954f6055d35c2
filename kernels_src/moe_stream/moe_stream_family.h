#pragma once
// A MoE block's experts at decode (T <= 16 tokens) on experts stored in the frag layout, as the streaming GEMV
// (fraglinear/frag_stream_gemv.cuh, ROUTE) runs them straight from the router's logits: no gating launch, no
// block alignment, no split-K or finalize launch. Each block picks its token's top-k as moe_gating does.
//   moe_gate_up_gemv.frag.<type>          (op moe_gate_up_gemv.frag): h[i] = silu(x_t Wg_e) * (x_t Wu_e) for
//                                         every routed row i = t * top_k + j, e its token's j-th choice;
//   moe_down_residual_gemv.frag.<type>    (op moe_down_residual_gemv.frag): out[t] += sum_j w_j * (h_i W2_e),
//                                         the grouped down GEMM, moe_finalize and the residual add in one launch.
// for <type> in awq_int4, int8_sym and q8_0. Dims {T, E, TOPK, N, K, G} as the grouped families' (moe_family.h),
// and R: whether the top-k weights are renormalized (moe_gating's R).
// The runtime runs them for a decode step's MoE layers where the norms are fused (qrun --fuse-norm).
#include <cstdint>
#include <vector>

#include "kernels_src/registry/family.h"

namespace qt::kernels::moe_stream {

inline const char* kGateUpOp = "moe_gate_up_gemv.frag";
inline constexpr int64_t kMaxTokens = 16;  // the GEMV's rows, as the dense decode GEMVs
inline const char* kDownResidualOp = "moe_down_residual_gemv.frag";

// Both families of each type, gate|up then down.
const std::vector<const KernelFamily*>& families();

// The shapes of a MoE layer's two routed GEMVs at `tokens` tokens: experts, top_k, renormalized weights, the
// hidden state's width
// `dim`, one expert's intermediate width `hidden`, and the experts' group.
Shape gate_up_shape(int64_t tokens, int64_t experts, int64_t top_k, bool renormalize, int64_t dim, int64_t hidden,
                    int64_t group);
Shape down_shape(int64_t tokens, int64_t experts, int64_t top_k, bool renormalize, int64_t dim, int64_t hidden,
                 int64_t group);
// A grouped family's shape {T, E, TOPK, N, K, G} (moe_family.h) as the routed GEMV's of the same op: R appended.
Shape routed_shape(const Shape& grouped, bool renormalize);
// Whether both routed GEMVs serve experts of type `t` at these shapes (a default point of each runs them): the
// one rule by which the runtime and the static step model take this path. (They run from sm_80; the runtime
// stores experts in the frag layout on sm_90.)
bool serves_decode(WeightType t, const Shape& gate_up, const Shape& down);

}  // namespace qt::kernels::moe_stream
