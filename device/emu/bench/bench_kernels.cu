#include "kernels_src/common/qt_cuda.h"

// Kernels for qt_emu_bench: each isolates one cost of emulation.

// Barrier cost: every thread passes `iters` __syncthreads (each one suspends and resumes every fiber).
__global__ void bench_barrier(int iters, int* out) {
  QT_SHARED(slot, int[1024]);
  int v = threadIdx.x;
  for (int i = 0; i < iters; ++i) {
    slot[threadIdx.x] = v;
    __syncthreads();
    v += slot[(threadIdx.x + 1) % blockDim.x];
    __syncthreads();
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

// Warp collective cost: `iters` butterfly shuffles per thread.
__global__ void bench_shfl(int iters, int* out) {
  int v = threadIdx.x;
  for (int i = 0; i < iters; ++i) v += __shfl_xor_sync(0xffffffffu, v, (i & 15) + 1);
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

// Straight-line arithmetic: `iters` dependent fused multiply-adds per thread and no synchronisation.
__global__ void bench_alu(int iters, float* out) {
  float a = threadIdx.x * 1e-3f, b = 1.0001f;
  for (int i = 0; i < iters; ++i) a = a * b + 1e-4f;
  out[blockIdx.x * blockDim.x + threadIdx.x] = a;
}

// Memory-access hooks: `iters` global loads and shared stores/loads per thread.
__global__ void bench_memory(const float* x, int n, int iters, float* out) {
  QT_SHARED(buf, float[256]);
  float s = 0.0f;
  for (int i = 0; i < iters; ++i) {
    const float v = x[(threadIdx.x + i * 7) % n];
    buf[threadIdx.x] = v;
    s += buf[threadIdx.x];
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// Tensor-core cost: one warp, `iters` ldmatrix.x4 + 2 ldmatrix.x2.trans + 2 mma per iteration.
__global__ void bench_mma(int iters, float* out) {
  QT_SHARED_ALIGNED(a_tile, 16, __half[16][24]);
  QT_SHARED_ALIGNED(b_tile, 16, __half[16][24]);
  const int lane = threadIdx.x;
  for (int i = lane; i < 16 * 24; i += 32) {
    (&a_tile[0][0])[i] = __float2half(0.01f * (i % 7));
    (&b_tile[0][0])[i] = __float2half(0.02f * (i % 5));
  }
  __syncwarp();
  float acc[2][4] = {};
  for (int it = 0; it < iters; ++it) {
    uint32_t a[4];
    qt::ldmatrix_x4(a, qt::smem_u32(&a_tile[lane % 16][(lane / 16) * 8]));
    for (int j = 0; j < 2; ++j) {
      uint32_t b[2];
      qt::ldmatrix_x2_trans(b, qt::smem_u32(&b_tile[lane % 16][j * 8]));
      qt::mma_m16n8k16_f16(acc[j], a, b, acc[j]);
    }
  }
  out[blockIdx.x * 32 + lane] = acc[0][0] + acc[1][3];
}
