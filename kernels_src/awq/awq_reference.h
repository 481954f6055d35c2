#pragma once
// CPU reference for the AWQ INT4 W4A16 family, on the packed layout of 'ak48' / AutoAWQ GEMM:
// qweight int32 [K][N/8], qzeros int32 [K/G][N/8], fp16 scales [K/G][N], nibble order {0,4,1,5,2,6,3,7}.
// Dequantization is models/core/weights.h's definition (qt::dequant_element); the kernels hold weights in
// fp16, so the GEMM reference rounds each dequantized weight to fp16 before the dot product, which it
// accumulates in double.
#include <cstdint>
#include <vector>

namespace qt::kernels::awq {

struct AwqData {
  int64_t m = 0, n = 0, k = 0, group = 0;
  std::vector<uint16_t> x;        // fp16 activations [M][K]
  std::vector<int32_t> qweight;   // [K][N/8]
  std::vector<int32_t> qzeros;    // [K/G][N/8]
  std::vector<uint16_t> scales;   // fp16 [K/G][N]
};

// Deterministic random problem: uniform nibbles and zeros, scales in [0.001, 0.01), x in [-1, 1).
AwqData make_awq_data(int64_t m, int64_t n, int64_t k, int64_t group, uint64_t seed);

// W as fp16-rounded floats, layout [K][N] (what the dequantize kernel writes).
std::vector<float> reference_dequant(const AwqData& d);

// y[M][N] = x[M][K] * W[K][N] (fp16 weights), in double. `abs_sum` (optional) receives per-output
// sum_k |x * w|, which bounds the summation error of any accumulation order.
std::vector<double> reference_gemm(const AwqData& d, std::vector<double>* abs_sum = nullptr);

}  // namespace qt::kernels::awq
