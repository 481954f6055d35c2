#pragma once
// The Q8_0 linear kernel families (sources in this folder), y[M][N] = x[M][K] * W^T with W = q * scale:
//   q8_0_gemv  decode, M <= 8, CUDA cores: warps own output rows, lanes stream K in 4/8/16-byte vectors,
//              split-k over blocks with an fp32 workspace and a reduction launch
//   q8_0_gemm  any M, tensor cores (sm_80+): cp.async pipeline, ldmatrix; `act` 0 dequantizes the int8 tile to
//              fp16 for mma.m16n8k16, `act` 1 quantizes the activations per group to int8 (one launch before
//              the GEMM) for mma.m16n8k32 s8 with the group scales applied per K tile
//   q8_0_dequant  W -> fp16 [N][K] (dims N, K, G), for the dequant + cuBLASLt contender of the batch dispatch
#include "kernels_src/registry/family.h"

namespace qt::kernels::q8_0 {

const KernelFamily& dequant_family();
const KernelFamily& gemv_family();
const KernelFamily& gemm_family();

// The Q8_0 linear layers of a model, one shape per distinct (N, K) labelled with the projections sharing it,
// M = `m`, G = the file's group (the qwen3.c rule when the config has none).
std::vector<Shape> q8_layer_shapes(const ModelConfig& c, const ModelWeights* w, int64_t m);

// Dynamic shared memory a GEMM point needs, in bytes.
int64_t gemm_smem_bytes(const Point& p);

}  // namespace qt::kernels::q8_0
