#include "kernels_src/common/qt_cuda.h"

// Correct kernels checked against CPU references: a block reduction (shared-memory tree + warp shuffles)
// and a tiled tensor-core GEMM (cp.async multi-stage pipeline + ldmatrix + mma.sync m16n8k16).

// partial[b] = sum of the elements block b strides over.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) k_reduce(const float* __restrict__ x, float* __restrict__ partial, int n) {
  QT_SHARED(buf, float[kThreads]);
  const int tid = threadIdx.x;
  float v = 0.0f;
  for (int i = blockIdx.x * kThreads + tid; i < n; i += gridDim.x * kThreads) v += x[i];
  buf[tid] = v;
  __syncthreads();
  for (int s = kThreads / 2; s >= 32; s >>= 1) {
    if (tid < s) buf[tid] += buf[tid + s];
    __syncthreads();
  }
  if (tid < 32) {
    v = buf[tid];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (tid == 0) partial[blockIdx.x] = v;
  }
}

// C[M][N] (fp32) = A[M][K] (fp16, row-major) * B[K][N] (fp16, row-major). Block tile 32x32x32, four warps
// each owning a 16x16 piece (two m16n8k16 tiles). M may be anything (rows past M are zero-filled by cp.async
// and not stored); N and K must be multiples of 32.
template <int kStages>
__global__ void __launch_bounds__(128) k_gemm(const __half* __restrict__ A, const __half* __restrict__ B,
                                              float* __restrict__ C, int M, int N, int K) {
  constexpr int kBM = 32, kBN = 32, kBK = 32, kPad = 8;  // 8 halves of padding keep rows 16-byte aligned
  QT_SHARED_ALIGNED(As, 16, __half[kStages][kBM][kBK + kPad]);
  QT_SHARED_ALIGNED(Bs, 16, __half[kStages][kBK][kBN + kPad]);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / 2, wn = warp % 2;
  const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
  const int ktiles = K / kBK;
  float acc[2][4];
  for (int j = 0; j < 2; ++j)
    for (int i = 0; i < 4; ++i) acc[j][i] = 0.0f;

  // Each thread moves one 16-byte chunk of A and one of B per stage.
  const int lr = tid / 4, lc = (tid % 4) * 8;
  auto load = [&](int stage, int kt) {
    const int gm = m0 + lr;
    const __half* a_src = A + static_cast<size_t>(gm < M ? gm : M - 1) * K + kt * kBK + lc;
    qt::cp_async_cg16(qt::smem_u32(&As[stage][lr][lc]), a_src, gm < M ? 16u : 0u);
    qt::cp_async_cg16(qt::smem_u32(&Bs[stage][lr][lc]), B + static_cast<size_t>(kt * kBK + lr) * N + n0 + lc);
  };

  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) load(s, s);
    qt::cp_async_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    qt::cp_async_wait<kStages - 2>();
    __syncthreads();
    // The stage refilled here was read in the previous iteration; the barrier above ordered those reads.
    const int next = kt + kStages - 1;
    if (next < ktiles) load(next % kStages, next);
    qt::cp_async_commit();
    const int st = kt % kStages;
    for (int kk = 0; kk < kBK; kk += 16) {
      uint32_t a[4];
      qt::ldmatrix_x4(a, qt::smem_u32(&As[st][wm * 16 + lane % 16][kk + (lane / 16) * 8]));
      for (int j = 0; j < 2; ++j) {
        uint32_t b[2];
        qt::ldmatrix_x2_trans(b, qt::smem_u32(&Bs[st][kk + lane % 16][wn * 16 + j * 8]));
        qt::mma_m16n8k16_f16(acc[j], a, b, acc[j]);
      }
    }
  }
  const int g = lane >> 2, t = lane & 3;
  for (int j = 0; j < 2; ++j) {
    for (int i = 0; i < 4; ++i) {
      const int row = m0 + wm * 16 + g + (i >= 2 ? 8 : 0);
      const int col = n0 + wn * 16 + j * 8 + 2 * t + (i & 1);
      if (row < M) C[static_cast<size_t>(row) * N + col] = acc[j][i];
    }
  }
}
