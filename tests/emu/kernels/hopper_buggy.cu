#include "kernels_src/common/qt_cuda.h"

// Deliberately wrong sm_90a kernels (one warpgroup, 128 threads, unless a case says otherwise): each must be
// stopped by the emulator with the right report (tests/emu/bug_cases.h). k_control, last, uses the same
// helpers correctly and reports nothing.

// A zero B operand of 8 x 16 (K-major, no swizzle: two 128-byte core matrices) written by the threads,
// made visible to the async proxy and ordered before the wgmma; returns its descriptor.
__device__ uint64_t ready_b8(uint16_t* b) {
  b[threadIdx.x % 128] = 0;
  qt::fence_proxy_async_shared();
  __syncthreads();
  return qt::wgmma_desc(qt::smem_u32(b), 128, 256, qt::kSwizzleNone);
}

// The mbarrier `bar` initialised by thread 0 for one arrival, visible to the async proxy and to every thread.
__device__ uint32_t ready_mbarrier(uint64_t* bar) {
  const uint32_t m = qt::smem_u32(bar);
  if (threadIdx.x == 0) {
    qt::mbarrier_init(m, 1);
    qt::fence_mbarrier_init();
  }
  __syncthreads();
  return m;
}

// One m64n8k16 wgmma of the warpgroup, fenced and committed: acc = A(a) * B(db) + acc.
__device__ void wgmma_group(float* acc, const uint32_t* a, uint64_t db) {
  qt::wgmma_fence();
  qt::wgmma_m64k16_f16_rs<8, 0>(acc, a, db, 1);
  qt::wgmma_commit_group();
}

// Thread 0 announces `expect` bytes on mbarrier m and bulk-copies `bytes` bytes of src to dst, completing on m.
__device__ void bulk_copy(uint32_t m, uint32_t dst, const void* src, uint32_t expect, uint32_t bytes) {
  if (threadIdx.x != 0) return;
  qt::mbarrier_arrive_expect_tx(m, expect);
  qt::cp_async_bulk_g2s(dst, src, bytes, m);
}

// Reads the accumulator between the wgmma and the wait that retires it.
__global__ void k_acc_read_in_flight(float* out) {
  QT_SHARED_ALIGNED(b, 128, uint16_t[128]);
  float acc[4] = {};
  uint32_t a[4] = {};
  wgmma_group(acc, a, ready_b8(b));
  out[threadIdx.x] = acc[0];
  qt::wgmma_wait_group<0>();
}

// Loads the next A fragment into registers the wgmma in flight still reads.
__global__ void k_a_write_in_flight(const uint32_t* x, float* out) {
  QT_SHARED_ALIGNED(b, 128, uint16_t[128]);
  float acc[4] = {};
  uint32_t a[4] = {};
  wgmma_group(acc, a, ready_b8(b));
  a[0] = x[threadIdx.x];
  qt::wgmma_wait_group<0>();
  out[threadIdx.x] = acc[0] + a[0];
}

// Refills the B stage with ordinary stores while the wgmma reading it is in flight.
__global__ void k_overwrite_in_flight(float* out) {
  QT_SHARED_ALIGNED(b, 128, uint16_t[128]);
  float acc[4] = {};
  uint32_t a[4] = {};
  wgmma_group(acc, a, ready_b8(b));
  b[threadIdx.x] = 1;
  qt::wgmma_wait_group<0>();
  out[threadIdx.x] = acc[0];
}

// Refills the B stage with a bulk copy while the wgmma reading it is in flight.
__global__ void k_bulk_overwrite_in_flight(const uint16_t* src, float* out) {
  QT_SHARED_ALIGNED(b, 128, uint16_t[128]);
  QT_SHARED_ALIGNED(bar, 8, uint64_t);
  const uint32_t m = ready_mbarrier(&bar);
  float acc[4] = {};
  uint32_t a[4] = {};
  wgmma_group(acc, a, ready_b8(b));
  bulk_copy(m, qt::smem_u32(b), src, 256, 256);
  qt::wgmma_wait_group<0>();
  out[threadIdx.x] = acc[0];
}

// The threads' stores reach the wgmma through a barrier but no proxy fence.
__global__ void k_missing_proxy_fence(float* out) {
  QT_SHARED_ALIGNED(b, 128, uint16_t[128]);
  float acc[4] = {};
  uint32_t a[4] = {};
  b[threadIdx.x] = 0;
  __syncthreads();
  wgmma_group(acc, a, qt::wgmma_desc(qt::smem_u32(b), 128, 256, qt::kSwizzleNone));
  qt::wgmma_wait_group<0>();
  out[threadIdx.x] = acc[0];
}

// Reads a bulk copy's destination after a __syncthreads, without waiting for its mbarrier phase.
__global__ void k_bulk_read_before_wait(const float* src, float* out) {
  QT_SHARED_ALIGNED(buf, 16, float[128]);
  QT_SHARED_ALIGNED(bar, 8, uint64_t);
  bulk_copy(ready_mbarrier(&bar), qt::smem_u32(buf), src, 512, 512);
  __syncthreads();
  out[threadIdx.x] = buf[threadIdx.x];
}

// A wgmma reads a bulk copy's destination that its warpgroup never waited for.
__global__ void k_wgmma_reads_unwaited_copy(const uint16_t* src, float* out) {
  QT_SHARED_ALIGNED(b, 128, uint16_t[128]);
  QT_SHARED_ALIGNED(bar, 8, uint64_t);
  float acc[4] = {};
  uint32_t a[4] = {};
  bulk_copy(ready_mbarrier(&bar), qt::smem_u32(b), src, 256, 256);
  __syncthreads();
  wgmma_group(acc, a, qt::wgmma_desc(qt::smem_u32(b), 128, 256, qt::kSwizzleNone));
  qt::wgmma_wait_group<0>();
  out[threadIdx.x] = acc[0];
}

// A second arrival on a phase whose one expected arrival came and whose bytes are still in flight.
__global__ void k_mbarrier_extra_arrival(const float* src, float* out) {
  QT_SHARED_ALIGNED(buf, 16, float[256]);
  QT_SHARED_ALIGNED(bar, 8, uint64_t);
  const uint32_t m = ready_mbarrier(&bar);
  bulk_copy(m, qt::smem_u32(buf), src, 1024, 512);
  __syncthreads();
  if (threadIdx.x == 32) qt::mbarrier_arrive(m);
  out[threadIdx.x] = 0.0f;
}

// The bulk copies bring more bytes than the arrival announced.
__global__ void k_mbarrier_tx_overflow(const float* src, float* out) {
  QT_SHARED_ALIGNED(buf, 16, float[128]);
  QT_SHARED_ALIGNED(bar, 8, uint64_t);
  const uint32_t m = ready_mbarrier(&bar);
  if (threadIdx.x == 0) {
    qt::mbarrier_arrive_expect_tx(m, 256);
    qt::cp_async_bulk_g2s(qt::smem_u32(buf), src, 512, m);
  }
  qt::mbarrier_wait_parity(m, 0);
  out[threadIdx.x] = buf[threadIdx.x];
}

// Half of the announced bytes never come: every thread waits for a phase that cannot complete.
__global__ void k_mbarrier_never_completes(const float* src, float* out) {
  QT_SHARED_ALIGNED(buf, 16, float[256]);
  QT_SHARED_ALIGNED(bar, 8, uint64_t);
  const uint32_t m = ready_mbarrier(&bar);
  bulk_copy(m, qt::smem_u32(buf), src, 1024, 512);
  qt::mbarrier_wait_parity(m, 0);
  out[threadIdx.x] = buf[threadIdx.x];
}

// A bulk copy of 24 bytes (which 0), to a destination 8 bytes off (1), from a source 8 bytes off (2).
__global__ void k_misaligned_bulk(const float* src, int which) {
  QT_SHARED_ALIGNED(buf, 16, float[64]);
  QT_SHARED_ALIGNED(bar, 8, uint64_t);
  const uint32_t m = ready_mbarrier(&bar);
  if (threadIdx.x == 0) {
    qt::mbarrier_arrive_expect_tx(m, 128);
    qt::cp_async_bulk_g2s(qt::smem_u32(buf) + (which == 1 ? 8 : 0), src + (which == 2 ? 2 : 0), which ? 128 : 24, m);
  }
}

// A descriptor 8 bytes off its tile (which 0); a 128B-swizzled operand starting in the second row of its
// swizzle pattern (1).
__global__ void k_bad_desc(float* out, int which) {
  QT_SHARED_ALIGNED(b, 1024, uint16_t[2048]);
  float acc[4] = {};
  uint32_t a[4] = {};
  ready_b8(b);
  const uint32_t base = qt::smem_u32(b);
  const uint64_t db = which == 0 ? qt::wgmma_desc(base + 8, 128, 256, qt::kSwizzleNone)
                                 : qt::wgmma_desc(base + 128, 16, 1024, qt::kSwizzle128B);
  qt::wgmma_fence();
  qt::wgmma_m64k16_f16_rs<8, 0>(acc, a, db, 1);
  qt::wgmma_commit_group();
  qt::wgmma_wait_group<0>();
  out[threadIdx.x] = acc[0];
}

// Launched with 96 threads: no complete warpgroup.
__global__ void k_partial_warpgroup(float* out) {
  QT_SHARED_ALIGNED(b, 128, uint16_t[128]);
  float acc[4] = {};
  uint32_t a[4] = {};
  for (uint32_t i = threadIdx.x; i < 128; i += 96) b[i] = 0;
  qt::fence_proxy_async_shared();
  __syncthreads();
  qt::wgmma_fence();
  qt::wgmma_m64k16_f16_rs<8, 0>(acc, a, qt::wgmma_desc(qt::smem_u32(b), 128, 256, qt::kSwizzleNone), 1);
  out[threadIdx.x] = acc[0];
}

// The last warp of the warpgroup returns before the wgmma.
__global__ void k_warp_skips_wgmma(float* out) {
  QT_SHARED_ALIGNED(b, 128, uint16_t[128]);
  float acc[4] = {};
  uint32_t a[4] = {};
  const uint64_t db = ready_b8(b);
  if (threadIdx.x >= 96) return;
  qt::wgmma_fence();
  qt::wgmma_m64k16_f16_rs<8, 0>(acc, a, db, 1);
  out[threadIdx.x] = acc[0];
}

// No wgmma_fence before the first wgmma.
__global__ void k_wgmma_without_fence(float* out) {
  QT_SHARED_ALIGNED(b, 128, uint16_t[128]);
  float acc[4] = {};
  uint32_t a[4] = {};
  const uint64_t db = ready_b8(b);
  qt::wgmma_m64k16_f16_rs<8, 0>(acc, a, db, 1);
  out[threadIdx.x] = acc[0];
}

// Returns with the wgmma group still in flight.
__global__ void k_exit_in_flight(float* out) {
  QT_SHARED_ALIGNED(b, 128, uint16_t[128]);
  float acc[4] = {};
  uint32_t a[4] = {};
  wgmma_group(acc, a, ready_b8(b));
  out[threadIdx.x] = 0.0f;
}

// A named barrier count that is not a multiple of the warp size (which 0); two warpgroups give one barrier
// different counts (1, 256 threads).
__global__ void k_named_barrier_count(float* out, int which) {
  if (which == 0) qt::named_barrier_sync(1, 48);
  else qt::named_barrier_sync(1, threadIdx.x < 128 ? 256 : 128);
  out[threadIdx.x] = 1.0f;
}

// Threads of another warp arrive on an mbarrier whose initialisation nothing orders before them.
__global__ void k_mbarrier_unordered_init(float* out) {
  QT_SHARED_ALIGNED(bar, 8, uint64_t);
  const uint32_t m = qt::smem_u32(&bar);
  if (threadIdx.x == 0) qt::mbarrier_init(m, 64);
  if (threadIdx.x >= 64) qt::mbarrier_arrive(m);
  out[threadIdx.x] = 1.0f;
}

// A bulk copy completes on an mbarrier whose initialisation was never fenced for the async proxy.
__global__ void k_mbarrier_init_unfenced(const float* src, float* out) {
  QT_SHARED_ALIGNED(buf, 16, float[128]);
  QT_SHARED_ALIGNED(bar, 8, uint64_t);
  const uint32_t m = qt::smem_u32(&bar);
  if (threadIdx.x == 0) qt::mbarrier_init(m, 1);
  __syncthreads();
  bulk_copy(m, qt::smem_u32(buf), src, 512, 512);
  qt::mbarrier_wait_parity(m, 0);
  out[threadIdx.x] = buf[threadIdx.x];
}

// Half of the warpgroup raises its register budget at one call site, half at another.
__global__ void k_setmaxnreg_divergent(float* out) {
  if (threadIdx.x < 64) qt::setmaxnreg_inc<232>();
  else qt::setmaxnreg_inc<232>();
  out[threadIdx.x] = 1.0f;
}

// The consumers only arrive at the named barrier: nothing orders the producers' stores before their reads.
__global__ void k_named_barrier_no_wait(int* out) {
  QT_SHARED(buf, int[128]);
  const int t = threadIdx.x;
  if (t < 64) buf[t] = t;
  qt::named_barrier_arrive(1, 128);
  if (t >= 64) out[t] = buf[t - 64];
}

// Two k-steps of wgmmas in flight, the older retired (wgmma_wait_group<1>), then a barrier and a cp.async refill
// of the stage the younger still reads: the barrier orders the threads, not the wgmma's reads. The Hopper GEMMs'
// x ring refilled one stage too early at kif = 2 (frag_wgmma_gemm.cuh).
__global__ void k_cp_async_refill_in_flight(const uint16_t* src, float* out) {
  QT_SHARED_ALIGNED(b, 128, uint16_t[128]);
  float acc[4] = {};
  uint32_t a[4] = {};
  const uint64_t db = ready_b8(b);
  wgmma_group(acc, a, db);
  wgmma_group(acc, a, db);
  qt::wgmma_wait_group<1>();
  __syncthreads();
  if (threadIdx.x < 16) qt::cp_async_cg16(qt::smem_u32(b) + 16 * threadIdx.x, src + 8 * threadIdx.x, 16);
  qt::cp_async_commit();
  qt::cp_async_wait<0>();
  qt::wgmma_wait_group<0>();
  out[threadIdx.x] = acc[0];
}

// The control: the helpers above used correctly report nothing (scale-d 0 drops the accumulator's ones and
// B is zero, so D is 0; the bulk copy brings src).
__global__ void k_control(const float* src, float* out) {
  QT_SHARED_ALIGNED(b, 128, uint16_t[128]);
  QT_SHARED_ALIGNED(buf, 16, float[128]);
  QT_SHARED_ALIGNED(bar, 8, uint64_t);
  const uint32_t m = ready_mbarrier(&bar);
  bulk_copy(m, qt::smem_u32(buf), src, 512, 512);
  float acc[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  uint32_t a[4] = {};
  const uint64_t db = ready_b8(b);
  qt::wgmma_fence();
  qt::wgmma_m64k16_f16_rs<8, 0>(acc, a, db, 0);
  qt::wgmma_commit_group();
  qt::wgmma_wait_group<0>();
  qt::mbarrier_wait_parity(m, 0);
  out[threadIdx.x] = acc[0] + acc[1] + acc[2] + acc[3] + buf[threadIdx.x];
}
