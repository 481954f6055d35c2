#pragma once
// The AWQ INT4 W4A16 kernel families (sources in this folder):
//   awq_dequant  AWQ -> fp16 W[K][N] for the cuBLAS path / pre-dequantized weights (sm_75+)
//   awq_gemv     decode y[M<=8][N] with CUDA cores: warps split K, lanes own packed columns, split-k (sm_75+)
//   awq_gemm     prefill: cp.async multi-stage pipeline, LOP3 magic INT4->FP16, ldmatrix + mma.m16n8k16 with
//                f32 accumulation, split-k (sm_80+)
// Split-k partial sums go to an fp32 workspace [split][M][N] reduced by awq_splitk_reduce_kernel.
#include "kernels_src/registry/family.h"

namespace qt::kernels::awq {

const KernelFamily& dequant_family();
const KernelFamily& gemv_family();
const KernelFamily& gemm_family();

// The linear layers of a model as AWQ problems (N = out features, K = in features), one per distinct
// (N, K), labelled with the projections that share it; M is set to `m`.
std::vector<Shape> awq_layer_shapes(const ModelConfig& c, int64_t m);
// The model's linear shapes of weight type `t` at batch m ({M, N, K, G}); with only a config, the decoder's
// projections (not the lm_head or the router) in the config's group, 128 where it has none.
std::vector<Shape> quantized_layer_shapes(const ModelConfig& c, const ModelWeights* w, WeightType t, int64_t m);

// Shared memory the GEMM point needs (dynamic, in bytes).
int64_t gemm_smem_bytes(const Point& p);

}  // namespace qt::kernels::awq
