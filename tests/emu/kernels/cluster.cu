#include "kernels_src/common/qt_cuda.h"

// Thread block clusters of two CTAs along x, 64 threads each (tests/emu/test_cluster.cpp). k_exchange uses
// distributed shared memory correctly; each of the others breaks one rule, which the emulator must report.

// Each CTA's 64 floats: rank * 1000 + thread.
__device__ void fill(float* buf) { buf[threadIdx.x] = qt::cluster_ctarank() * 1000.0f + threadIdx.x; }

// The other CTA's floats 4 (t % 16) .. 4 (t % 16) + 3, summed.
__device__ float neighbour_sum(float* buf) {
  const uint32_t other = qt::map_shared_rank(qt::smem_u32(buf + 4 * (threadIdx.x % 16)), qt::cluster_ctarank() ^ 1);
  const float4 v = qt::ld_shared_cluster_f32x4(other);
  return v.x + v.y + v.z + v.w;
}

// out[64 b + t] = the neighbour's sum; out[512 + b] = rank, out[520 + b] = cluster size (b = blockIdx.x < 8).
__global__ void k_exchange(float* out) {
  QT_SHARED_ALIGNED(buf, 16, float[64]);
  fill(buf);
  qt::cluster_sync();
  out[64 * blockIdx.x + threadIdx.x] = neighbour_sum(buf);
  if (threadIdx.x == 0) {
    out[512 + blockIdx.x] = qt::cluster_ctarank();
    out[520 + blockIdx.x] = qt::cluster_nctarank();
  }
  qt::cluster_sync();
}

// No barrier.cluster between the neighbour's writes and this CTA's reads of them.
__global__ void k_read_before_sync(float* out) {
  QT_SHARED_ALIGNED(buf, 16, float[64]);
  fill(buf);
  out[64 * blockIdx.x + threadIdx.x] = neighbour_sum(buf);
  qt::cluster_sync();
}

// No barrier.cluster after the reads: a CTA may exit, and its shared memory go, while the other still reads it.
__global__ void k_exit_while_read(float* out) {
  QT_SHARED_ALIGNED(buf, 16, float[64]);
  fill(buf);
  qt::cluster_sync();
  out[64 * blockIdx.x + threadIdx.x] = neighbour_sum(buf);
}

// The two warps of each CTA reach barrier.cluster at different call sites.
__global__ void k_divergent_sync(float* out) {
  if (threadIdx.x < 32) {
    qt::cluster_sync();
  } else {
    qt::cluster_sync();
  }
  out[threadIdx.x] = 1.0f;
}

// CTA rank 1 returns at once; rank 0 waits at barrier.cluster for it forever.
__global__ void k_exit_before_sync(float* out) {
  if (qt::cluster_ctarank() == 1) return;
  qt::cluster_sync();
  out[threadIdx.x] = 1.0f;
}

// A rank outside the cluster.
__global__ void k_mapa_bad_rank(float* out) {
  QT_SHARED_ALIGNED(buf, 16, float[64]);
  fill(buf);
  qt::cluster_sync();
  const uint32_t far = qt::map_shared_rank(qt::smem_u32(buf), 2);
  out[threadIdx.x] = qt::ld_shared_cluster_f32x4(far).x;
  qt::cluster_sync();
}

// A read past the neighbour's shared memory.
__global__ void k_remote_out_of_bounds(float* out) {
  QT_SHARED_ALIGNED(buf, 16, float[64]);
  fill(buf);
  qt::cluster_sync();
  const uint32_t past = qt::map_shared_rank(qt::smem_u32(buf + 64), qt::cluster_ctarank() ^ 1);
  out[threadIdx.x] = qt::ld_shared_cluster_f32x4(past).x;
  qt::cluster_sync();
}

// Alone (no cluster): writes the static shared memory a cluster's CTAs read each other's of before.
__global__ void k_fill_alone(float* out) {
  QT_SHARED_ALIGNED(buf, 16, float[64]);
  fill(buf);
  __syncthreads();
  out[threadIdx.x] = buf[63 - threadIdx.x];
}

// Rank 0's thread 0 spins on a flag in global memory that rank 1's thread 0 sets: legal, since a cluster's CTAs
// run at the same time.
__global__ void k_flag_across_ctas(float* out, volatile int* flag) {
  if (qt::cluster_ctarank() == 1 && threadIdx.x == 0) *flag = 1;
  if (qt::cluster_ctarank() == 0 && threadIdx.x == 0) {
    while (*flag == 0) {
    }
    out[0] = 1.0f;
  }
  qt::cluster_sync();
}
