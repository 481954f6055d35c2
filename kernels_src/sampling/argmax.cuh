#pragma once
// Greedy decoding's argmax over fp16 logits[M][V]: token[m] = the index of the row's largest value, ties to
// the lowest index; NaN never wins, and a row with no comparable value (all NaN) gives -1, which the runtime
// reports as a model whose logits are not numbers (never a token id).
// Grid (splits, M): block (s, m) scans the s-th of `splits` VEC-aligned chunks of row m, thread t taking VEC
// consecutive logits at t*VEC with one vector access, stepping by THREADS*VEC. Candidates (value, index;
// index -1 = none) are reduced by warp shuffles, then across warps through shared memory. With one split
// the block writes the token; otherwise it writes its candidate to ws_val/ws_idx[m][s], and
// argmax_combine_kernel (one warp per row) picks among them.
#include "kernels_src/common/qt_vec.h"

// Whether candidate (v, i) beats (bv, bi): NaN never does, anything beats "none", then the larger value,
// then on equal values the lower index.
__device__ __forceinline__ bool argmax_better(float v, int i, float bv, int bi) {
  if (v != v || i < 0) return false;
  if (bi < 0) return true;
  return v > bv || (v == bv && i < bi);
}

__device__ __forceinline__ void argmax_warp_reduce(float& v, int& i) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (argmax_better(ov, oi, v, i)) v = ov, i = oi;
  }
}

template <int THREADS, int VEC>
__global__ void __launch_bounds__(THREADS)
    argmax_kernel(const __half* __restrict__ logits, int* __restrict__ token, float* __restrict__ ws_val,
                  int* __restrict__ ws_idx, int V) {
  qt::grid_dependency_entry();
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "whole warps, at most 1024 threads");
  const int m = blockIdx.y, s = blockIdx.x, splits = gridDim.x;
  const int chunk = ((V + splits - 1) / splits + VEC - 1) / VEC * VEC;
  const int begin = s * chunk;
  const int end = min(V, begin + chunk);
  const __half* row = logits + (int64_t)m * V;
  float best = 0.0f;
  int best_i = -1;
  for (int c = begin + threadIdx.x * VEC; c < end; c += THREADS * VEC) {
    float v[VEC];
    qt::load_f16<VEC>(row + c, v);
#pragma unroll
    for (int j = 0; j < VEC; ++j)
      if (argmax_better(v[j], c + j, best, best_i)) best = v[j], best_i = c + j;
  }
  argmax_warp_reduce(best, best_i);
  QT_SHARED(warp_val, float[THREADS / 32]);
  QT_SHARED(warp_idx, int[THREADS / 32]);
  if ((threadIdx.x & 31) == 0) warp_val[threadIdx.x >> 5] = best, warp_idx[threadIdx.x >> 5] = best_i;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < THREADS / 32; ++w)
      if (argmax_better(warp_val[w], warp_idx[w], best, best_i)) best = warp_val[w], best_i = warp_idx[w];
    if (splits == 1) {
      token[m] = best_i;
    } else {
      ws_val[m * splits + s] = best;
      ws_idx[m * splits + s] = best_i;
    }
  }
}

// One warp per row: the best of the row's `splits` (<= 32) candidates.
__global__ void __launch_bounds__(32)
    argmax_combine_kernel(const float* __restrict__ ws_val, const int* __restrict__ ws_idx, int* __restrict__ token,
                          int splits) {
  qt::grid_dependency_entry();
  const int m = blockIdx.x, lane = threadIdx.x;
  float v = 0.0f;
  int i = -1;
  if (lane < splits) v = ws_val[m * splits + lane], i = ws_idx[m * splits + lane];
  argmax_warp_reduce(v, i);
  if (lane == 0) token[m] = i;
}
