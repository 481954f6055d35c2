#pragma once
// f16_gemv: decode GEMV y[M<=8][N] = x * W^T for fp16 weights "values" [N][K] (row-major), split-k over
// blocks (source f16_gemv.cuh). Serves F16 weights and those the backend pre-dequantizes to fp16 (F32/BF16
// tensors, the fp16 lm_head of AWQ files). Dims {M, N, K, G} with G = K (no groups).
#include "kernels_src/registry/family.h"

namespace qt::kernels::f16_linear {

const KernelFamily& gemv_family();

}  // namespace qt::kernels::f16_linear
