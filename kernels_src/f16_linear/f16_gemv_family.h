#pragma once
// f16_gemv: decode GEMV y[M<=8][N] = x * W^T for fp16 weights "values" [N][K] (row-major), split-k over
// blocks (source f16_gemv.cuh). Serves F16 weights and those the backend pre-dequantizes to fp16 (F32/BF16
// tensors, the fp16 lm_head of AWQ files). Dims {M, N, K, G} with G = K (no groups).
#include "kernels_src/registry/family.h"

namespace qt::kernels::f16_linear {

const KernelFamily& gemv_family();

// The dense linear layers the backend runs on fp16 weights (fp16 in the file, or fp32 and bf16 it converts), at
// batch m, with G = K (no groups); with only a config, every linear layer and the lm_head. MoE experts stay
// quantized on the device, so they are never among them.
std::vector<Shape> f16_shapes(const ModelConfig& c, const ModelWeights* w, int64_t m);

}  // namespace qt::kernels::f16_linear
