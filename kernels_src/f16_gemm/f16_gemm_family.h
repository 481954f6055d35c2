#pragma once
// f16_gemm: y[M][N] = x[M][K] * W^T over fp16 weights "values" [N][K] (F16 files, and the tensors the GPU
// backend converts to fp16: F32/BF16 weights, AWQ files' lm_head), any M, on tensor cores (sm_80+):
// cp.async pipeline, ldmatrix, mma.m16n8k16 with fp32 accumulation, split-k. Dims M, N, K, G (G = K).
#include "kernels_src/registry/family.h"

namespace qt::kernels::f16_gemm {

const KernelFamily& gemm_family();

// Dynamic shared memory a point needs, in bytes.
int64_t smem_bytes(const Point& p);

}  // namespace qt::kernels::f16_gemm
