#pragma once
// One token's top-k experts from its router logits, by one warp: moe_gating_kernel's rule, and that of the
// kernels that pick their own experts instead of reading the gating's (the routed expert GEMVs of
// kernels_src/moe_stream). CPU definition: moe_reference.h's gating.
#include "kernels_src/common/qt_cuda.h"
#include "kernels_src/sampling/argmax.cuh"  // argmax_better: larger value first, ties to the lower index

// Lane l holds experts l, l+32, ... (EPL per lane, so E <= 32 * EPL), and K <= 32. Experts are chosen on the
// logits (the softmax is monotonic, and equal logits give equal probabilities) by K rounds of a warp argmax;
// lane s < K returns choice s. Weights are the fp32 probabilities, renormalized over the K chosen when asked.
template <int EPL>
__device__ __forceinline__ void moe_topk_warp(const __half* __restrict__ row, int E, int K, int renormalize, int lane,
                                              int& id, float& weight) {
  const float neg_inf = __int_as_float(0xff800000);
  float v[EPL];
  float mx = neg_inf;
#pragma unroll
  for (int j = 0; j < EPL; ++j) {
    const int e = lane + 32 * j;
    v[j] = e < E ? __half2float(row[e]) : neg_inf;
    mx = fmaxf(mx, v[j]);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < EPL; ++j) sum += lane + 32 * j < E ? expf(v[j] - mx) : 0.0f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  bool taken[EPL];
#pragma unroll
  for (int j = 0; j < EPL; ++j) taken[j] = false;
  float top_sum = 0.0f, mine = 0.0f;
  int mine_id = 0;
  for (int s = 0; s < K; ++s) {
    float bv = 0.0f;
    int bi = -1;
#pragma unroll
    for (int j = 0; j < EPL; ++j) {
      const int e = lane + 32 * j;
      if (e < E && !taken[j] && argmax_better(v[j], e, bv, bi)) bv = v[j], bi = e;
    }
    argmax_warp_reduce(bv, bi);
#pragma unroll
    for (int j = 0; j < EPL; ++j) taken[j] = taken[j] || lane + 32 * j == bi;
    const float p = expf(bv - mx) / sum;
    top_sum += p;
    if (lane == s) mine = p, mine_id = bi;
  }
  id = mine_id;
  weight = renormalize ? mine / top_sum : mine;
}
