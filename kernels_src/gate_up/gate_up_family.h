#pragma once
// The fused decode MLP front, h[M<=8][N] = fp16(silu(x·Wg) * (x·Wu)), one family per weight type:
//   gate_up_swiglu.q8_0      gate_up_q8_0.cuh: a warp per ROWS output rows of the row-major int8 weights
//   gate_up_swiglu.awq_int4  gate_up_awq.cuh: lanes own packed columns, warps split K (awq_gemv's frame)
// Both split K over blocks as a parameter, with a reduction launch that applies silu.
#include "kernels_src/registry/family.h"

namespace qt::kernels::gate_up {

// The exact gate and up projections of every output (double), with sum |x*w| of each: that sum bounds the
// error of any fp32 accumulation order.
struct Projections {
  std::vector<double> g, g_abs, u, u_abs;
};
// The bound 16 sqrt(K) 2^-24 on |fp32 sum - exact| / sum|x*w| for a K-term dot product in any order.
double fp32_sum_error(int64_t k);
// Expected h = fp16(silu(g) * u) (buffer "h") for kernels whose g and u are within a * sum|x*w| of exact.
Expected swiglu_expected(const Projections& p, double a);

const KernelFamily& q8_0_family();
const KernelFamily& awq_int4_family();

}  // namespace qt::kernels::gate_up
