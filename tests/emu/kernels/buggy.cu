#include "kernels_src/common/qt_cuda.h"

// Deliberately wrong kernels: each one must be stopped by the emulator with the right report.

// Reads a neighbour's shared slot without a __syncthreads after the writes.
__global__ void k_missing_sync(const float* x, float* out) {
  QT_SHARED(buf, float[64]);
  const int t = threadIdx.x;
  buf[t] = x[t];
  out[t] = buf[(t + 1) % 64];
}

// Off-by-one bound: thread n writes one element past the end.
__global__ void k_oob_write(float* out, int n) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t <= n) out[t] = 1.0f;
}

// Half of the block returns early and never reaches the barrier the other half waits at.
__global__ void k_divergent_barrier(float* out) {
  const int t = threadIdx.x;
  if (t % 2) return;
  out[t] = 1.0f;
  __syncthreads();
  out[t] = 2.0f;
}

// Two different __syncthreads call sites in an if/else.
__global__ void k_two_barriers(float* out) {
  const int t = threadIdx.x;
  if (t < 16) {
    out[t] = 1.0f;
    __syncthreads();
  } else {
    out[t] = 2.0f;
    __syncthreads();
  }
}

// ldmatrix row addresses offset by 8 bytes.
__global__ void k_misaligned_ldmatrix(uint32_t* out) {
  QT_SHARED_ALIGNED(tile, 16, uint16_t[8][16]);
  const int lane = threadIdx.x;
  for (int i = lane; i < 128; i += 32) (&tile[0][0])[i] = static_cast<uint16_t>(i);
  __syncwarp();
  uint32_t r[1];
  qt::ldmatrix_x1(r, qt::smem_u32(&tile[lane % 8][4]));
  out[lane] = r[0];
}

// cp.async without cp_async_wait before the barrier and the read.
__global__ void k_missing_wait(const float4* src, float* out) {
  QT_SHARED_ALIGNED(buf, 16, float4[32]);
  const int t = threadIdx.x;
  qt::cp_async_cg16(qt::smem_u32(&buf[t]), src + t);
  qt::cp_async_commit();
  __syncthreads();
  out[t] = buf[(t + 1) % 32].x;
}

// A full-warp shuffle after half of the warp returned.
__global__ void k_shfl_exited(int* out) {
  const int lane = threadIdx.x;
  if (lane >= 16) return;
  out[lane] = __shfl_xor_sync(0xffffffffu, lane, 1);
}

// Lanes disagree on the member mask of one shuffle.
__global__ void k_mask_mismatch(int* out) {
  const int lane = threadIdx.x;
  const unsigned mask = lane == 5 ? 0x0000ffffu : 0xffffffffu;
  out[lane] = __shfl_down_sync(mask, lane, 1);
}

// A float4 load from an address that is only 4-byte aligned.
__global__ void k_misaligned_vector(const float* x, float* out) {
  const int t = threadIdx.x;
  const float4 v = *reinterpret_cast<const float4*>(x + 1 + 4 * t);
  out[t] = v.x + v.y + v.z + v.w;
}

// Writes one float past the end of a static shared array.
__global__ void k_shared_oob(float* out) {
  QT_SHARED(buf, float[32]);
  const int t = threadIdx.x;
  buf[t + 1] = 1.0f;
  __syncthreads();
  out[t] = buf[t];
}

// Lanes 0-15 wait in __syncwarp for lanes 16-31, which wait at __syncthreads: nobody can proceed.
__global__ void k_warp_deadlock(int* out) {
  const int lane = threadIdx.x;
  if (lane < 16) __syncwarp(0xffffffffu);
  __syncthreads();
  out[lane] = lane;
}

// Explicit device-side failure.
__global__ void k_trap(int* out) {
  if (threadIdx.x == 3) qt::trap("k_trap: invariant violated");
  out[blockIdx.x * blockDim.x + threadIdx.x] = 0;
}

// A read of a location another thread wrote, ordered only by a __syncwarp that covers both lanes: correct.
__global__ void k_syncwarp_ordered(int* out) {
  QT_SHARED(buf, int[32]);
  const int lane = threadIdx.x;
  buf[lane] = lane * 3;
  __syncwarp();
  out[lane] = buf[31 - lane];
}
