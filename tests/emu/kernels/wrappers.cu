#include "kernels_src/common/qt_cuda.h"

// Kernels exercising every wrapper of kernels_src/common/qt_cuda.h. The emulator tests check their outputs
// against the PTX ISA tables; tests/emu/test_nvrtc_header.cpp compiles this same file with NVRTC.

template <int kLut>
__device__ uint32_t lop3_fixed(uint32_t a, uint32_t b, uint32_t c) {
  return qt::lop3<kLut>(a, b, c);
}

template <int... kLuts>
struct Lop3Table {
  __device__ static uint32_t apply(int lut, uint32_t a, uint32_t b, uint32_t c) {
    uint32_t r = 0;
    // Exactly one immediate matches: the fold keeps the LUT a compile-time constant for each lop3.
    ((lut == kLuts ? (r = lop3_fixed<kLuts>(a, b, c), 0) : 0), ...);
    return r;
  }
};

template <int kBase>
__device__ uint32_t lop3_dispatch16(int lut, uint32_t a, uint32_t b, uint32_t c) {
  return Lop3Table<kBase + 0, kBase + 1, kBase + 2, kBase + 3, kBase + 4, kBase + 5, kBase + 6, kBase + 7, kBase + 8,
                   kBase + 9, kBase + 10, kBase + 11, kBase + 12, kBase + 13, kBase + 14, kBase + 15>::apply(lut, a, b, c);
}

// out[lut * n + i] = lop3<lut>(a[i], b[i], c[i]) for all 256 LUTs; one block per LUT.
__global__ void k_lop3(const uint32_t* a, const uint32_t* b, const uint32_t* c, uint32_t* out, int n) {
  const int lut = blockIdx.x;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    uint32_t r = 0;
    switch (lut >> 4) {
      case 0: r = lop3_dispatch16<0>(lut, a[i], b[i], c[i]); break;
      case 1: r = lop3_dispatch16<16>(lut, a[i], b[i], c[i]); break;
      case 2: r = lop3_dispatch16<32>(lut, a[i], b[i], c[i]); break;
      case 3: r = lop3_dispatch16<48>(lut, a[i], b[i], c[i]); break;
      case 4: r = lop3_dispatch16<64>(lut, a[i], b[i], c[i]); break;
      case 5: r = lop3_dispatch16<80>(lut, a[i], b[i], c[i]); break;
      case 6: r = lop3_dispatch16<96>(lut, a[i], b[i], c[i]); break;
      case 7: r = lop3_dispatch16<112>(lut, a[i], b[i], c[i]); break;
      case 8: r = lop3_dispatch16<128>(lut, a[i], b[i], c[i]); break;
      case 9: r = lop3_dispatch16<144>(lut, a[i], b[i], c[i]); break;
      case 10: r = lop3_dispatch16<160>(lut, a[i], b[i], c[i]); break;
      case 11: r = lop3_dispatch16<176>(lut, a[i], b[i], c[i]); break;
      case 12: r = lop3_dispatch16<192>(lut, a[i], b[i], c[i]); break;
      case 13: r = lop3_dispatch16<208>(lut, a[i], b[i], c[i]); break;
      case 14: r = lop3_dispatch16<224>(lut, a[i], b[i], c[i]); break;
      default: r = lop3_dispatch16<240>(lut, a[i], b[i], c[i]); break;
    }
    out[lut * n + i] = r;
  }
}

// out[i] = prmt(a[i], b[i], sel[i]).
__global__ void k_prmt(const uint32_t* a, const uint32_t* b, const uint32_t* sel, uint32_t* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = qt::prmt(a[i], b[i], sel[i]);
}

// out[4 i + k] = dequant_u4x8_to_f16x2(q[i])[k].
__global__ void k_dequant(const uint32_t* q, uint32_t* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  uint32_t h[4];
  qt::dequant_u4x8_to_f16x2(q[i], h);
  reinterpret_cast<uint4*>(out)[i] = make_uint4(h[0], h[1], h[2], h[3]);
}

// Packed f16x2 / bf16x2 arithmetic and conversions: 8 results per input triple.
__global__ void k_half_ops(const uint32_t* a, const uint32_t* b, const uint32_t* c, const float* f, uint32_t* out,
                           int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  uint32_t* o = out + 8 * i;
  o[0] = qt::add_f16x2(a[i], b[i]);
  o[1] = qt::sub_f16x2(a[i], b[i]);
  o[2] = qt::mul_f16x2(a[i], b[i]);
  o[3] = qt::fma_f16x2(a[i], b[i], c[i]);
  o[4] = qt::fma_bf16x2(a[i], b[i], c[i]);
  o[5] = qt::cvt_f16x2(f[2 * i], f[2 * i + 1]);
  o[6] = qt::cvt_bf16x2(f[2 * i], f[2 * i + 1]);
  // The CUDA half type: one rounding per operation through __half arithmetic.
  const __half ha = __ushort_as_half(static_cast<unsigned short>(a[i] & 0xffffu));
  const __half hb = __ushort_as_half(static_cast<unsigned short>(b[i] & 0xffffu));
  const __half hc = __ushort_as_half(static_cast<unsigned short>(c[i] & 0xffffu));
  const __half hs = __hfma(ha, hb, hc);
  const __half hp = ha * hb + hc;  // two roundings: multiply, then add
  o[7] = static_cast<uint32_t>(__half_as_ushort(hs)) | (static_cast<uint32_t>(__half_as_ushort(hp)) << 16);
}

// Every lane of one warp builds the mma fragments from row-major A[16][16], B[k][n] (16x8), C[16][8] using the
// PTX ISA fragment tables (written out here independently of the emulator), runs mma and stores D the same way.
// mma.m16n8k32 s8: A[16][32], B[k][n] (32x8) int8 row-major, C[16][8] int32, fragments per the PTX ISA table
// for .s8: a0-a3 (g, 4t..4t+3), a4-a7 (g+8, 4t..), a8-a11 (g, 16+4t..), a12-a15 (g+8, 16+4t..);
// b0-b3 (k = 4t.., n = g), b4-b7 (k = 16+4t.., n = g); C/D as for m16n8k16.
__global__ void k_mma_s8(const int8_t* A, const int8_t* B, const int32_t* C, int32_t* D) {
  const int lane = threadIdx.x;
  const int g = lane >> 2, t = lane & 3;
  uint32_t a[4], b[2];
  int32_t c[4], d[4];
  const int arow[4] = {g, g + 8, g, g + 8};
  const int acol[4] = {4 * t, 4 * t, 4 * t + 16, 4 * t + 16};
  for (int r = 0; r < 4; ++r) {
    a[r] = 0;
    for (int j = 0; j < 4; ++j)
      a[r] |= static_cast<uint32_t>(static_cast<uint8_t>(A[arow[r] * 32 + acol[r] + j])) << (8 * j);
  }
  for (int r = 0; r < 2; ++r) {
    b[r] = 0;
    for (int j = 0; j < 4; ++j)
      b[r] |= static_cast<uint32_t>(static_cast<uint8_t>(B[(4 * t + 16 * r + j) * 8 + g])) << (8 * j);
  }
  for (int i = 0; i < 4; ++i) c[i] = C[(g + (i >= 2 ? 8 : 0)) * 8 + 2 * t + (i & 1)];
  qt::mma_m16n8k32_s8(d, a, b, c);
  for (int i = 0; i < 4; ++i) D[(g + (i >= 2 ? 8 : 0)) * 8 + 2 * t + (i & 1)] = d[i];
}

template <bool kBf16>
__global__ void k_mma(const uint16_t* A, const uint16_t* B, const float* C, float* D) {
  const int lane = threadIdx.x;
  const int g = lane >> 2, t = lane & 3;
  uint32_t a[4], b[2];
  float c[4], d[4];
  // a0,a1: (g, 2t..2t+1); a2,a3: (g+8, 2t..); a4,a5: (g, 2t+8..); a6,a7: (g+8, 2t+8..)
  const int arow[4] = {g, g + 8, g, g + 8};
  const int acol[4] = {2 * t, 2 * t, 2 * t + 8, 2 * t + 8};
  for (int r = 0; r < 4; ++r) {
    a[r] = static_cast<uint32_t>(A[arow[r] * 16 + acol[r]]) | (static_cast<uint32_t>(A[arow[r] * 16 + acol[r] + 1]) << 16);
  }
  // b0,b1: (k = 2t..2t+1, n = g); b2,b3: (k = 2t+8.., n = g)
  for (int r = 0; r < 2; ++r) {
    const int k = 2 * t + 8 * r;
    b[r] = static_cast<uint32_t>(B[k * 8 + g]) | (static_cast<uint32_t>(B[(k + 1) * 8 + g]) << 16);
  }
  // c0,c1: (g, 2t..); c2,c3: (g+8, 2t..)
  for (int i = 0; i < 4; ++i) c[i] = C[(g + (i >= 2 ? 8 : 0)) * 8 + 2 * t + (i & 1)];
  if (kBf16) {
    qt::mma_m16n8k16_bf16(d, a, b, c);
  } else {
    qt::mma_m16n8k16_f16(d, a, b, c);
  }
  for (int i = 0; i < 4; ++i) D[(g + (i >= 2 ? 8 : 0)) * 8 + 2 * t + (i & 1)] = d[i];
}

// One warp: shared tile holds 4 matrices of 8x8 b16 values (value = src[...]); each ldmatrix variant writes
// its destination registers to out[variant][lane][reg]. Row addresses: lane 8m + r -> matrix m, row r.
__global__ void k_ldmatrix(const uint16_t* src, uint32_t* out) {
  QT_SHARED_ALIGNED(tile, 16, uint16_t[4][8][8]);
  const int lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) (&tile[0][0][0])[i] = src[i];
  __syncwarp();
  const int m = lane / 8, r = lane % 8;
  const uint32_t addr = qt::smem_u32(&tile[m][r][0]);
  uint32_t reg[4] = {0, 0, 0, 0};
  uint32_t* o = out + lane * 4;
  qt::ldmatrix_x1(reg, addr);
  o[0 * 128 + 0] = reg[0];
  qt::ldmatrix_x2(reg, addr);
  for (int k = 0; k < 2; ++k) o[1 * 128 + k] = reg[k];
  qt::ldmatrix_x4(reg, addr);
  for (int k = 0; k < 4; ++k) o[2 * 128 + k] = reg[k];
  qt::ldmatrix_x1_trans(reg, addr);
  o[3 * 128 + 0] = reg[0];
  qt::ldmatrix_x2_trans(reg, addr);
  for (int k = 0; k < 2; ++k) o[4 * 128 + k] = reg[k];
  qt::ldmatrix_x4_trans(reg, addr);
  for (int k = 0; k < 4; ++k) o[5 * 128 + k] = reg[k];
}

// Shuffles for every mode and width: out[((mode * 6 + w) * 2 + d) * 64 + tid] (two warps, 64 threads).
__global__ void k_shfl(const int* deltas, int* out) {
  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int v = 1000 * (tid / 32) + 7 * lane + 1;
  const int widths[6] = {1, 2, 4, 8, 16, 32};
  for (int w = 0; w < 6; ++w) {
    for (int d = 0; d < 2; ++d) {
      const int delta = deltas[d];
      out[((0 * 6 + w) * 2 + d) * 64 + tid] = __shfl_sync(0xffffffffu, v, delta, widths[w]);
      out[((1 * 6 + w) * 2 + d) * 64 + tid] = __shfl_up_sync(0xffffffffu, v, delta, widths[w]);
      out[((2 * 6 + w) * 2 + d) * 64 + tid] = __shfl_down_sync(0xffffffffu, v, delta, widths[w]);
      out[((3 * 6 + w) * 2 + d) * 64 + tid] = __shfl_xor_sync(0xffffffffu, v, delta, widths[w]);
    }
  }
}

// Votes over predicate bits pred[tid] and a half-warp shuffle/ballot with a partial member mask.
__global__ void k_vote(const int* pred, unsigned* out) {
  const int tid = threadIdx.x;
  const int p = pred[tid];
  out[tid * 5 + 0] = __ballot_sync(0xffffffffu, p);
  out[tid * 5 + 1] = static_cast<unsigned>(__any_sync(0xffffffffu, p));
  out[tid * 5 + 2] = static_cast<unsigned>(__all_sync(0xffffffffu, p));
  const unsigned half = (tid % 32) < 16 ? 0x0000ffffu : 0xffff0000u;
  out[tid * 5 + 3] = __ballot_sync(half, p);
  out[tid * 5 + 4] = static_cast<unsigned>(__shfl_xor_sync(half, tid, 1));
}

// cp.async with every size and every src-size (zero fill), groups completed by wait_group in order.
// Block of 32 threads; thread t copies 16 bytes with src_bytes = t % 17 (16 -> full) into stage 0, then
// 8-byte and 4-byte copies into stage 1 and 2; out gets the three stages after the matching waits.
__global__ void k_cp_async(const uint8_t* src, uint8_t* out) {
  QT_SHARED_ALIGNED(stage, 16, uint8_t[3][32 * 16]);
  const int t = threadIdx.x;
  const uint32_t nbytes = static_cast<uint32_t>(t % 17);
  qt::cp_async_cg16(qt::smem_u32(&stage[0][t * 16]), src + t * 16, nbytes);
  qt::cp_async_commit();
  qt::cp_async_ca<8>(qt::smem_u32(&stage[1][t * 16]), src + 512 + t * 16, static_cast<uint32_t>(t % 9));
  qt::cp_async_ca<8>(qt::smem_u32(&stage[1][t * 16 + 8]), src + 512 + t * 16 + 8);
  qt::cp_async_commit();
  qt::cp_async_ca<4>(qt::smem_u32(&stage[2][t * 16]), src + 1024 + t * 16, static_cast<uint32_t>(t % 5));
  qt::cp_async_ca<4>(qt::smem_u32(&stage[2][t * 16 + 4]), src + 1024 + t * 16 + 4);
  qt::cp_async_ca<4>(qt::smem_u32(&stage[2][t * 16 + 8]), src + 1024 + t * 16 + 8, 0);
  qt::cp_async_ca<4>(qt::smem_u32(&stage[2][t * 16 + 12]), src + 1024 + t * 16 + 12);
  qt::cp_async_commit();
  qt::cp_async_wait<2>();  // the oldest group (stage 0) is complete
  __syncthreads();
  for (int i = t; i < 512; i += 32) out[i] = stage[0][i];
  qt::cp_async_wait<0>();
  __syncthreads();
  for (int i = t; i < 1024; i += 32) out[512 + i] = (&stage[1][0])[i];
}

// Streaming 16-byte loads with an evict-first policy: each thread copies its 16 bytes (the hint changes caching,
// never the value).
__global__ void k_ldg_stream(const uint32_t* src, uint32_t* out) {
  const uint64_t policy = qt::policy_evict_first();
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const uint4 v = qt::ldg_stream_u4(src + 4 * t, policy);
  out[4 * t] = v.x, out[4 * t + 1] = v.y, out[4 * t + 2] = v.z, out[4 * t + 3] = v.w;
}

// Device-wide atomics from many blocks: counts, float sums, max and CAS-built increments.
__global__ void k_atomics(int* count, float* sum, unsigned* maxv, unsigned long long* cas_count) {
  const int gid = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(count, 1);
  atomicAdd(sum, 0.5f);
  atomicMax(maxv, static_cast<unsigned>(gid));
  unsigned long long old = *cas_count, assumed;
  do {
    assumed = old;
    old = atomicCAS(cas_count, assumed, assumed + 1ull);
  } while (old != assumed);
}

// Barrier reductions and dynamic shared memory.
__global__ void k_barrier_ops(const int* pred, int* out) {
  QT_DYNAMIC_SHARED(dyn, int);
  const int t = threadIdx.x;
  dyn[t] = pred[t] * (t + 1);
  const int count = __syncthreads_count(pred[t]);
  const int all = __syncthreads_and(pred[t]);
  const int any = __syncthreads_or(pred[t]);
  int s = 0;
  for (int i = 0; i < static_cast<int>(blockDim.x); ++i) s += dyn[i];
  if (t == 0) {
    out[0] = count;
    out[1] = all;
    out[2] = any;
    out[3] = s;
    out[4] = QT_ARCH;
  }
}

// The order in which the threads of a block pass one point: a shared counter taken with atomicAdd.
__global__ void k_order(int* out) {
  QT_SHARED(counter, int);
  if (threadIdx.x == 0) counter = 0;
  __syncthreads();
  out[threadIdx.x] = atomicAdd(&counter, 1);
}
