#pragma once
// CPU reference for the Q8_0 linear families, on the qwen3.c layout of models/core/weights.h: q int8 [N][K]
// row-major, fp32 scales [N*K/G], w = q * scale (models' dequant_element, fp32). The exact result is
// accumulated in double; the error terms each kernel variant may add are returned per output, so a family
// can state its tolerance from them.
#include <cstdint>
#include <vector>

namespace qt::kernels::q8_0 {

struct Q8Data {
  int64_t m = 0, n = 0, k = 0, group = 0;
  std::vector<uint16_t> x;      // fp16 activations [M][K]
  std::vector<int8_t> q;        // [N][K]
  std::vector<float> scales;    // [N*K/G]
};

// Deterministic random problem (qt::Rng): q uniform in [-127, 127], scales in [0.0005, 0.005), x in [-1, 1).
Q8Data make_q8_data(int64_t m, int64_t n, int64_t k, int64_t group, uint64_t seed);

struct Q8Result {
  std::vector<double> y;          // [M][N], x * W^T with W = q * s (fp32), in double
  std::vector<double> abs_xw;     // sum_k |x * w|: bounds the rounding of any fp32 summation order
  std::vector<double> abs_x;      // sum_k |x|
  // sum over groups of amax_g(x) * sum_{k in g} |w|: the error of quantizing x per group to int8 with scale
  // amax/127 is at most half a step, amax/254, per element, so this times 1/254 bounds its effect on y.
  std::vector<double> act_quant;
};
Q8Result reference_linear(const Q8Data& d);

// Activations quantized as the int8-activation GEMM does it (fp32: inv = 127 / amax, xq = round-half-even(x *
// inv), xs = amax / 127; an all-zero group gives xq = 0, xs = 0): xq [M][K], xs [M][K/G].
void quantize_activations(const Q8Data& d, std::vector<int8_t>& xq, std::vector<float>& xs);

}  // namespace qt::kernels::q8_0
