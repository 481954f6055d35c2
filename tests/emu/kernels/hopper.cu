#include "kernels_src/common/qt_cuda.h"

// Correct sm_90a kernels checked against CPU references (tests/emu/test_hopper.cpp): wgmma over every
// swizzle mode and major-ness, with A from registers or shared memory, and a warp-specialised pipeline
// (a producer warpgroup's bulk copies into a ring of stages, full/empty mbarriers, consumer warpgroups).

// Operand tiles of kRows (M or N) x 64 16-bit elements in shared memory, placed from the pictures of TMA
// boxes and CuTe's swizzle atoms (not from the descriptor arithmetic the emulator decodes): a swizzled
// tile is cut into panels one swizzle row wide (W bytes: 128, 64, 32) along its contiguous dimension; a
// panel is a row-major stack of W-byte rows whose 16-byte chunks are XORed, within each group of 8 rows,
// with (row % 8) >> (3 - log2(W / 16)). Without swizzling the tile is a grid of 8 x 16-byte core matrices.
// K-major: rows are M or N, contiguous along K; MN-major: rows are k, contiguous along M or N.
template <int kSwizzle, bool kMnMajor, int kRows>
struct TileLayout {
  static constexpr uint32_t kW = qt::wgmma_swizzle_row_bytes(kSwizzle);  // bytes per swizzle row (16: none)
  static constexpr uint32_t kBytes = kRows * 64 * 2;
  static_assert(kRows % 8 == 0 && (!kMnMajor || kSwizzle == qt::kSwizzleNone || kRows % (kW / 2) == 0),
                "whole core matrices; MN-major panels filled");

  __device__ static uint32_t swizzled(uint32_t row, uint32_t byte) {
    const uint32_t shift = kW == 128 ? 0 : kW == 64 ? 1 : 2;
    return ((byte / 16) ^ ((row % 8) >> shift)) * 16 + byte % 16;
  }
  // Byte offset of element (mn, k) from the tile's base (1024-byte aligned).
  __device__ static uint32_t offset(uint32_t mn, uint32_t k) {
    if (kSwizzle == qt::kSwizzleNone) {
      // Core matrices of 8 x 8 elements (K-major: 8 rows of 8 k; MN-major: 8 k of 8 mn), in columns of one
      // 8-element chunk of k, each column running down mn.
      const uint32_t cell = (k / 8 * (kRows / 8) + mn / 8) * 128;
      return cell + (kMnMajor ? (k % 8) * 16 + (mn % 8) * 2 : (mn % 8) * 16 + (k % 8) * 2);
    }
    const uint32_t per_row = kW / 2;  // elements in a swizzle row
    if (!kMnMajor) return (k / per_row) * kRows * kW + mn * kW + swizzled(mn, (k % per_row) * 2);
    return (mn / per_row) * 64 * kW + k * kW + swizzled(k, (mn % per_row) * 2);
  }
  // The descriptor of k-step j (k = 16 j .. 16 j + 15) of rows row0 .. row0 + 63 (or all kRows for B).
  __device__ static uint64_t desc(uint32_t base, uint32_t j, uint32_t row0 = 0) {
    const uint32_t k0 = 16 * j;
    if (kSwizzle == qt::kSwizzleNone) {
      // Next chunk of k (K-major LBO, MN-major LBO) one column on, next 8 rows of mn (SBO) one cell down.
      const uint32_t column = kRows / 8 * 128;
      return qt::wgmma_desc(base + 2 * j * column + row0 / 8 * 128, column, 128, kSwizzle);
    }
    const uint32_t per_row = kW / 2;
    if (!kMnMajor) {
      return qt::wgmma_desc(base + k0 / per_row * kRows * kW + row0 * kW + (k0 % per_row) * 2, 16, 8 * kW, kSwizzle);
    }
    return qt::wgmma_desc(base + k0 * kW + row0 / per_row * 64 * kW, 64 * kW, 8 * kW, kSwizzle);
  }
};

// Thread t's A fragment (m64k16, k-step j) of a row-major 64 x ld matrix of 16-bit values: register r holds
// the pair of elements 2r, 2r + 1 (PTX "Register Fragments for wgmma .m64nNk16", matrix A).
__device__ void load_a_fragment(const uint16_t* a, uint32_t ld, uint32_t j, uint32_t* regs) {
  const uint32_t t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  for (uint32_t r = 0; r < 4; ++r) {
    const uint32_t row = 16 * warp + lane / 4 + 8 * (r % 2), col = 16 * j + 2 * (lane % 4) + 8 * (r / 2);
    regs[r] = static_cast<uint32_t>(a[row * ld + col]) | (static_cast<uint32_t>(a[row * ld + col + 1]) << 16);
  }
}

// Accumulator float i of thread t: row and column of the 64 x N tile (matrix D of the same section).
__device__ uint32_t d_row(uint32_t t, uint32_t i) { return 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2); }
__device__ uint32_t d_col(uint32_t t, uint32_t i) { return 8 * (i / 4) + 2 * (t % 4) + i % 2; }

template <int N, int kTransA, int kTransB, int kBf16>
__device__ void wgmma_ss(float* acc, uint64_t da, uint64_t db) {
  if (kBf16) qt::wgmma_m64k16_bf16_ss<N, kTransA, kTransB>(acc, da, db, 1);
  else qt::wgmma_m64k16_f16_ss<N, kTransA, kTransB>(acc, da, db, 1);
}
template <int N, int kTransB, int kBf16>
__device__ void wgmma_rs(float* acc, const uint32_t* a, uint64_t db) {
  if (kBf16) qt::wgmma_m64k16_bf16_rs<N, kTransB>(acc, a, db, 1);
  else qt::wgmma_m64k16_f16_rs<N, kTransB>(acc, a, db, 1);
}

// D (64 x N, fp32) = A (64 x K, row-major) * Bt^T (Bt: N x K, row-major) by one warpgroup. Each 64-deep
// k-slab is placed in shared memory by the threads' own stores (then fence_proxy_async_shared and a
// barrier); A comes from shared memory (kAMode 1: K-major, 2: M-major) or from registers (kAMode 0).
template <int N, int kSwizzle, int kAMode, int kTransB, int kBf16>
__global__ void __launch_bounds__(128) k_wgmma_tile(const uint16_t* A, const uint16_t* Bt, float* D, int K) {
  using LA = TileLayout<kSwizzle, kAMode == 2, 64>;
  using LB = TileLayout<kSwizzle, kTransB == 1, N>;
  QT_DYNAMIC_SHARED(smem, uint8_t);
  const uint32_t pad = (1024 - qt::smem_u32(smem) % 1024) % 1024;  // swizzle patterns start at 1024 bytes
  uint8_t* a_tile = smem + pad;
  uint8_t* b_tile = a_tile + LA::kBytes;
  const uint32_t a_base = qt::smem_u32(a_tile), b_base = qt::smem_u32(b_tile);
  const uint32_t t = threadIdx.x;
  float acc[N / 2];
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.0f;
  uint32_t a[4][4];
  for (int k0 = 0; k0 < K; k0 += 64) {
    for (uint32_t e = t; kAMode != 0 && e < 64 * 64; e += 128) {
      *reinterpret_cast<uint16_t*>(a_tile + LA::offset(e / 64, e % 64)) = A[(e / 64) * K + k0 + e % 64];
    }
    for (uint32_t e = t; e < N * 64; e += 128) {
      *reinterpret_cast<uint16_t*>(b_tile + LB::offset(e / 64, e % 64)) = Bt[(e / 64) * K + k0 + e % 64];
    }
    for (uint32_t j = 0; kAMode == 0 && j < 4; ++j) load_a_fragment(A + k0, K, j, a[j]);
    qt::fence_proxy_async_shared();
    __syncthreads();
    qt::wgmma_fence_operand<N / 2>(acc);
    qt::wgmma_fence_operand<16>(&a[0][0]);
    qt::wgmma_fence();
    for (uint32_t j = 0; j < 4; ++j) {
      if (kAMode == 0) wgmma_rs<N, kTransB, kBf16>(acc, a[j], LB::desc(b_base, j));
      else wgmma_ss<N, kAMode == 2, kTransB, kBf16>(acc, LA::desc(a_base, j), LB::desc(b_base, j));
    }
    qt::wgmma_commit_group();
    qt::wgmma_wait_group<0>();
    qt::wgmma_fence_operand<N / 2>(acc);
    __syncthreads();  // the next slab's stores come after every thread's wgmmas retired
  }
  for (uint32_t i = 0; i < N / 2; ++i) D[d_row(t, i) * N + d_col(t, i)] = acc[i];
}

// The stage images k_ws_gemm bulk-copies, one per k-slab (block s packs slab s): the A tile (K-major in
// the swizzle layout, or row-major when the consumers load it into registers), then the B tile.
template <int N, int kConsumers, int kSwizzle, int kTransB, int kARegs>
__global__ void __launch_bounds__(128) k_pack_images(const uint16_t* A, const uint16_t* Bt, uint8_t* images, int K) {
  constexpr uint32_t kARows = 64 * kConsumers;
  using LA = TileLayout<kSwizzle, false, kARows>;
  using LB = TileLayout<kSwizzle, kTransB == 1, N>;
  uint8_t* image = images + blockIdx.x * (kARows * 128 + LB::kBytes);
  const uint32_t k0 = 64 * blockIdx.x;
  for (uint32_t e = threadIdx.x; e < kARows * 64; e += 128) {
    const uint32_t off = kARegs ? e * 2 : LA::offset(e / 64, e % 64);
    *reinterpret_cast<uint16_t*>(image + off) = A[(e / 64) * K + k0 + e % 64];
  }
  for (uint32_t e = threadIdx.x; e < N * 64; e += 128) {
    *reinterpret_cast<uint16_t*>(image + kARows * 128 + LB::offset(e / 64, e % 64)) = Bt[(e / 64) * K + k0 + e % 64];
  }
}

// Warp-specialised GEMM: D (64 kConsumers x N) = A * B over `slabs` k-slabs of 64. Warpgroup 0 produces:
// its thread 0 bulk-copies each slab's stage image (laid out by the host: the A tile, then the B tile) into a
// ring of kStages stages, announcing the bytes on the stage's full mbarrier, after the consumers released
// the stage on its empty mbarrier. Consumer warpgroup c computes rows 64 c.. with wgmma, A from the stage
// through a descriptor (K-major) or, kARegs, loaded from the stage (row-major) into registers first; it
// releases a stage once its group retired, per thread (kPerThreadRelease) or one lane per warp after a
// __syncwarp. The epilogue goes through shared memory and
// a named barrier across the consumer warpgroups.
template <int N, int kStages, int kConsumers, int kSwizzle, int kTransB, int kARegs, int kPerThreadRelease>
__global__ void __launch_bounds__(128 * (kConsumers + 1), 1)
    k_ws_gemm(const uint8_t* images, float* D, int slabs) {
  constexpr uint32_t kARows = 64 * kConsumers;
  using LA = TileLayout<kSwizzle, false, kARows>;
  using LB = TileLayout<kSwizzle, kTransB == 1, N>;
  constexpr uint32_t kABytes = kARows * 64 * 2, kStageBytes = kABytes + LB::kBytes;
  QT_SHARED_ALIGNED(bars, 8, uint64_t[2 * kStages]);
  QT_DYNAMIC_SHARED(smem, uint8_t);
  const uint32_t pad = (1024 - qt::smem_u32(smem) % 1024) % 1024;
  uint8_t* stages = smem + pad;
  float* staging = reinterpret_cast<float*>(stages + kStages * kStageBytes);
  const uint32_t stage0 = qt::smem_u32(stages), t = threadIdx.x, wg = t / 128;
  auto full = [&](uint32_t s) { return qt::smem_u32(&bars[s]); };
  auto empty = [&](uint32_t s) { return qt::smem_u32(&bars[kStages + s]); };
  if (t == 0) {
    for (uint32_t s = 0; s < kStages; ++s) {
      qt::mbarrier_init(full(s), 1);
      qt::mbarrier_init(empty(s), kPerThreadRelease ? 128 * kConsumers : 4 * kConsumers);
    }
    qt::fence_mbarrier_init();
  }
  __syncthreads();
  if (wg == 0) {
    qt::setmaxnreg_dec<40>();
    if (t == 0) {
      for (int slab = 0; slab < slabs; ++slab) {
        const uint32_t s = slab % kStages, round = slab / kStages;
        qt::mbarrier_wait_parity(empty(s), (round & 1) ^ 1);
        qt::mbarrier_arrive_expect_tx(full(s), kStageBytes);
        const uint8_t* image = images + static_cast<size_t>(slab) * kStageBytes;
        qt::cp_async_bulk_g2s(stage0 + s * kStageBytes, image, kABytes, full(s));
        qt::cp_async_bulk_g2s(stage0 + s * kStageBytes + kABytes, image + kABytes, LB::kBytes, full(s));
      }
    }
    return;
  }
  qt::setmaxnreg_inc<232>();
  const uint32_t c = wg - 1, ct = t % 128;
  float acc[N / 2];
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.0f;
  uint32_t a[4][4];
  // With A from shared memory one wgmma group stays in flight while the next slab is waited for; A in
  // registers is reloaded every slab, so its group retires first (ptxas serialises wgmmas otherwise).
  constexpr int kInFlight = kARegs ? 0 : 1;
  for (int slab = 0; slab < slabs; ++slab) {
    const uint32_t s = slab % kStages, round = slab / kStages;
    qt::mbarrier_wait_parity(full(s), round & 1);
    const uint32_t a_base = stage0 + s * kStageBytes, b_base = a_base + kABytes;
    for (uint32_t j = 0; kARegs && j < 4; ++j) {
      load_a_fragment(reinterpret_cast<const uint16_t*>(stages + s * kStageBytes) + 64 * 64 * c, 64, j, a[j]);
    }
    qt::wgmma_fence_operand<N / 2>(acc);
    qt::wgmma_fence_operand<16>(&a[0][0]);
    qt::wgmma_fence();
    for (uint32_t j = 0; j < 4; ++j) {
      if (kARegs) wgmma_rs<N, kTransB, 0>(acc, a[j], LB::desc(b_base, j));
      else wgmma_ss<N, 0, kTransB, 0>(acc, LA::desc(a_base, j, 64 * c), LB::desc(b_base, j));
    }
    qt::wgmma_commit_group();
    qt::wgmma_wait_group<kInFlight>();
    qt::wgmma_fence_operand<N / 2>(acc);
    if (slab >= kInFlight) {  // the stage whose wgmmas just retired goes back to the producer
      const uint32_t done = empty((slab - kInFlight) % kStages);
      if (kPerThreadRelease) {
        qt::mbarrier_arrive(done);
      } else {
        __syncwarp();
        if (t % 32 == 0) qt::mbarrier_arrive(done);
      }
    }
  }
  qt::wgmma_wait_group<0>();
  qt::wgmma_fence_operand<N / 2>(acc);
  for (uint32_t i = 0; i < N / 2; ++i) staging[(64 * c + d_row(ct, i)) * N + d_col(ct, i)] = acc[i];
  qt::named_barrier_sync(1, 128 * kConsumers);
  for (uint32_t e = t - 128; e < kARows * N; e += 128 * kConsumers) D[e] = staging[e];
}

// Named barriers as a hand-off inside one warpgroup: warps 0-1 store, bar.arrive; warps 2-3 bar.sync, read
// them and store, bar.arrive on a second barrier that warps 0-1 bar.sync on before they read.
// out[t] = 1001 t + 64 for t < 64, 1000 (t - 64) + t above.
__global__ void __launch_bounds__(128) k_named_barrier_handoff(int* out) {
  QT_SHARED(buf, int[128]);
  const int t = threadIdx.x;
  if (t < 64) {
    buf[t] = 1000 * t;
    qt::named_barrier_arrive(1, 128);
    qt::named_barrier_sync(2, 128);
    out[t] = buf[t + 64];
  } else {
    qt::named_barrier_sync(1, 128);
    buf[t] = buf[t - 64] + t;
    qt::named_barrier_arrive(2, 128);
    out[t] = buf[t];
  }
}

// Thread 0 of each block writes a flag into static shared memory; after a __syncthreads every thread reads it
// (threads of several warps: a multi-warp read set). Before that, every thread reads two other shared words,
// so the block makes multi-warp read sets of its own first. The proxy fence turns the block's clocks on.
// Blocks that run one after another on one host thread reuse the slots: an earlier block's reads are no race.
// out[b][t] = 1000 (b + 1) + 1.
__global__ void __launch_bounds__(128) k_shared_flag_per_block(int* out) {
  QT_SHARED(words, int[2]);
  QT_SHARED(flag, int[1]);
  qt::fence_proxy_async_shared();
  if (threadIdx.x == 0) words[0] = 1, words[1] = 1000 * (blockIdx.x + 1);
  __syncthreads();
  const int w = words[0] * words[1];
  __syncthreads();
  if (threadIdx.x == 0) flag[0] = 1;
  __syncthreads();
  out[blockIdx.x * 128 + threadIdx.x] = w + flag[0];
}
