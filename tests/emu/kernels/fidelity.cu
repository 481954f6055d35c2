#include "kernels_src/common/qt_cuda.h"

// Kernels for the emulator's fidelity: legal code it must run without a report, the bugs it must report on
// every scheduling seed, and arithmetic it must compute the way the GPU compiler does.

// ---- legal code ------------------------------------------------------------------------------------------

// A half-warp shuffle, then a full-warp __syncwarp: two collectives whose member masks overlap but differ.
__global__ void k_halfwarp_shfl_then_syncwarp(int* out) {
  const int lane = threadIdx.x;
  int v = lane;
  if (lane < 16) v = __shfl_sync(0x0000ffffu, v, (lane + 1) % 16);
  __syncwarp();
  out[lane] = v;
}

// Warp 0 spins on a shared flag that warp 1 sets: a GPU runs both warps, so this completes.
__global__ void k_spin_wait(int* out) {
  QT_SHARED(flag, int);
  const int t = threadIdx.x;
  if (t == 0) flag = 0;
  __syncthreads();
  volatile int* f = &flag;
  if (t < 32) {
    while (*f == 0) {
    }
    out[t] = 1;
  } else {
    if (t == 32) *f = 1;
    out[t] = 2;
  }
}

// The "last block" pattern: every block writes its partial, fences, takes a ticket; the last one sums all.
__global__ void k_last_block_sum(const float* x, float* partial, unsigned* ticket, float* out) {
  QT_SHARED(is_last, int);
  const int t = threadIdx.x;
  if (t == 0) {
    float s = 0;
    for (int i = 0; i < 32; ++i) s += x[blockIdx.x * 32 + i];
    partial[blockIdx.x] = s;
    __threadfence();
    is_last = atomicAdd(ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (is_last && t == 0) {
    float s = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) s += partial[b];
    *out = s;
  }
}

// Split-k done right: partials per split into a workspace (this launch), reduced by a second launch.
__global__ void k_splitk_partials(const float* x, float* ws, int n) {
  const int col = threadIdx.x;
  float s = 0;
  for (int i = blockIdx.x; i < n; i += gridDim.x) s += x[i * 32 + col];
  ws[blockIdx.x * 32 + col] = s;
}
__global__ void k_splitk_reduce(const float* ws, float* y, int splits) {
  const int col = threadIdx.x;
  float s = 0;
  for (int b = 0; b < splits; ++b) s += ws[b * 32 + col];
  y[col] = s;
}

// ---- bugs ------------------------------------------------------------------------------------------------

// After two __syncwarp, every lane re-reads buf[0] while lane 1 overwrites it: nothing orders the write
// against the other lanes' re-read.
__global__ void k_reread_race(int* out) {
  QT_SHARED(buf, int[32]);
  const int lane = threadIdx.x;
  buf[lane] = lane;
  __syncwarp();
  const int a = buf[0];
  __syncwarp();
  const int b = buf[0];
  if (lane == 1) buf[0] = 7;
  out[lane] = a + b;
}

// Seventeen __syncwarp calls by each half-warp, none covering both halves: lane 0's read of lane 16's write
// stays unordered however many syncs come between.
__global__ void k_partial_syncwarps_race(int* out) {
  QT_SHARED(buf, int[32]);
  const int lane = threadIdx.x;
  buf[lane] = lane;
  const unsigned half = lane < 16 ? 0x0000ffffu : 0xffff0000u;
  for (int i = 0; i < 17; ++i) __syncwarp(half);
  out[lane] = lane == 0 ? buf[16] : 0;
}

// Threads 32-63 read shared slots nobody wrote.
__global__ void k_uninit_shared(float* out) {
  QT_SHARED(buf, float[64]);
  const int t = threadIdx.x;
  if (t < 32) buf[t] = 1.0f;
  __syncthreads();
  out[t] = buf[t];
}

// A plain store into a shared counter that the other threads update atomically.
__global__ void k_store_vs_atomic(int* out) {
  QT_SHARED(count, int);
  const int t = threadIdx.x;
  if (t == 0) count = 0;
  __syncthreads();
  atomicAdd(&count, 1);
  if (t == 40) count = 100;
  __syncthreads();
  out[t] = count;
}

// A plain store into a global counter that every block updates atomically.
__global__ void k_global_store_vs_atomic(int* count) {
  atomicAdd(count, 1);
  if (blockIdx.x == 1 && threadIdx.x == 0) *count = 0;
}

// Non-atomic counter++ by every thread of every block.
__global__ void k_global_counter(int* count) { *count = *count + 1; }

// Split-k done wrong: every block adds its partial straight into y.
__global__ void k_splitk_plain_add(const float* x, float* y, int n) {
  const int col = threadIdx.x;
  float s = 0;
  for (int i = blockIdx.x; i < n; i += gridDim.x) s += x[i * 32 + col];
  y[col] += s;
}

// Within one block, thread t reads the global slot thread t+1 writes, with no barrier between.
__global__ void k_global_block_race(float* g, float* out) {
  const int t = threadIdx.x;
  g[t] = static_cast<float>(t);
  out[t] = g[(t + 1) % 64];
}

// A spin-wait on a flag that no thread ever sets, while the rest of the block waits at a barrier.
__global__ void k_spin_forever(int* out) {
  QT_SHARED(flag, int);
  const int t = threadIdx.x;
  if (t == 0) flag = 0;
  __syncthreads();
  volatile int* f = &flag;
  if (t == 0) {
    while (*f == 0) {
    }
  }
  __syncthreads();
  out[t] = 1;
}

// ---- arithmetic ------------------------------------------------------------------------------------------

// fp32 a*b+c: NVRTC contracts it into one fma.rn.f32 (--fmad=true by default).
__global__ void k_mul_add(const float* a, const float* b, const float* c, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] * b[i] + c[i];
}

// __hmax / __hmin of every pair of the inputs.
__global__ void k_hmax_hmin(const unsigned short* in, unsigned short* out_max, unsigned short* out_min, int n) {
  const int i = threadIdx.x / n, j = threadIdx.x % n;
  const __half a = __ushort_as_half(in[i]), b = __ushort_as_half(in[j]);
  out_max[threadIdx.x] = __half_as_ushort(__hmax(a, b));
  out_min[threadIdx.x] = __half_as_ushort(__hmin(a, b));
}

// ---- profile -----------------------------------------------------------------------------------------------

// One warp reads a column of a [32][stride] float tile: bank (lane * stride) % 32.
template <int kStride>
__global__ void k_column_read(float* out) {
  QT_SHARED(tile, float[32 * kStride]);
  const int lane = threadIdx.x;
  for (int i = lane; i < 32 * kStride; i += 32) tile[i] = static_cast<float>(i);
  __syncwarp();
  out[lane] = tile[lane * kStride];
}

// Each lane loads one float4 of a contiguous array: 512 bytes per warp request, 16 sectors.
__global__ void k_float4_load(const float4* x, float* out) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const float4 v = x[t];
  out[t] = v.x + v.y + v.z + v.w;
}
