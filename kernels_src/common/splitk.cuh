#pragma once
// What every linear family's output side shares: storing an m16n8 mma accumulator tile either as fp16 y or,
// when the grid splits K (gridDim.z > 1), as this split's fp32 partials in ws[z][M][N]; the reduction launch
// that sums the partials into y with one fp16 rounding; and the protocol by which the last block of a group of
// splits finds out it is last, for the kernels that reduce in the same launch.
#include "kernels_src/common/qt_cuda.h"

// acc[mf][nf][4] of one warp in mma.m16n8 C-fragment order: the warp's tile starts at row m0 and column
// n0 + warp * WN. Rows past M and columns past N are dropped; odd N takes the halves one by one.
template <int MF, int NF, int WN>
__device__ __forceinline__ void store_mma_tile(const float (&acc)[MF][NF][4], __half* y, float* ws, int m0, int n0,
                                               int warp, int lane, int M, int N) {
  const int gid = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int mf = 0; mf < MF; ++mf)
#pragma unroll
    for (int nf = 0; nf < NF; ++nf) {
      const int col = n0 + warp * WN + nf * 8 + 2 * t4;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + mf * 16 + gid + 8 * h;
        if (row >= M || col >= N) continue;
        const float v0 = acc[mf][nf][2 * h], v1 = acc[mf][nf][2 * h + 1];
        if (gridDim.z == 1) {
          __half* dst = y + (int64_t)row * N + col;
          if ((N & 1) == 0) {
            *reinterpret_cast<uint32_t*>(dst) = qt::cvt_f16x2(v0, v1);
          } else {
            dst[0] = __float2half_rn(v0);
            if (col + 1 < N) dst[1] = __float2half_rn(v1);
          }
        } else {
          float* dst = ws + ((int64_t)blockIdx.z * M + row) * N + col;
          dst[0] = v0;
          if (col + 1 < N) dst[1] = v1;
        }
      }
    }
}

// y[i] = sum over splits of ws[split][i], rounded to fp16 once.
template <int THREADS>
__global__ void __launch_bounds__(THREADS) splitk_reduce_kernel(const float* ws, __half* y, int count, int splits) {
  qt::grid_dependency_entry();
  const int i = blockIdx.x * THREADS + threadIdx.x;
  if (i >= count) return;
  float sum = 0.0f;
  for (int z = 0; z < splits; ++z) sum += ws[(int64_t)z * count + i];
  y[i] = __float2half_rn(sum);
}

// The "last block to arrive" of a group of `blocks` blocks (the splits of one output tile, of one KV head...):
// every block calls it once it has written its partials; it returns true in every thread of the block that
// arrived last, which may then read all of the group's partials, and resets `counter` to 0 for the next launch
// (no memset). Release: each block's fence, then its count; acquire: each reading thread's own atomic on the
// counter after it, then a fence. A block-wide call: every thread of the block must make it. (frag_linear.cuh,
// pinned by the H200 fixture's SHA, keeps its own copy.)
__device__ __forceinline__ bool last_block_to_arrive(unsigned* counter, unsigned blocks) {
  __threadfence();
  __syncthreads();
  bool last = false;
  if (threadIdx.x == 0) {
    last = atomicAdd(counter, 1u) == blocks - 1;
    if (last) atomicExch(counter, 0u);
  }
  if (!__syncthreads_or(last)) return false;
  atomicOr(counter, 0u);
  __threadfence();
  return true;
}

// What the last block to arrive does with an output tile of a K split: the partials of its `rows` rows from m0 and
// `cols` columns from n0, summed over the gridDim.z splits of ws[z][M][N] in split order and rounded to fp16
// once into y.
template <int THREADS>
__device__ __forceinline__ void sum_split_partials(const float* ws, __half* y, int m0, int n0, int rows, int cols,
                                                   int M, int N) {
  for (int i = threadIdx.x; i < rows * cols; i += THREADS) {
    const int row = m0 + i / cols, col = n0 + i % cols;
    float sum = 0.0f;
    for (int z = 0; z < (int)gridDim.z; ++z) sum += ws[((int64_t)z * M + row) * N + col];
    y[(int64_t)row * N + col] = __float2half_rn(sum);
  }
}
