#pragma once
// y[M][N] = x[M][K] * W on weights in the frag layout (frag_layout.h), INT4 (BITS = 4, AWQ zeros) or INT8
// (BITS = 8, +128 bias), fp16 activations and output, fp32 accumulation on mma.m16n8k16 (sm_80 and later): the
// prefill GEMM whose warps share each weight tile through shared memory.
//
// Why: frag_linear.cuh's GEMM has each warp load its own weight tiles into registers, so a block is one warp
// tall (at most 64 rows of M) and every weight is loaded again by each further 64 rows, a few tiles per warp in
// flight; those re-reads wait on the L2's latency (results/marlin-class-kernels.md). Here the block is WM warps
// tall and WN wide: the WM warps of a column share its weight tiles, so a weight is loaded once per BM = 16 MF
// WM rows, and every operand arrives by cp.async STAGES - 1 stages ahead (Little's law: a stage is tens of KB a
// block), as Marlin's main loop keeps its weights in flight.
//
// Block: warp w = WN wm + wn computes rows 16 MF wm .. of the block's BM rows (blockIdx.y) by column tile
// blockIdx.x WN + wn (64 output features; a tile past N computes on the last one and stores nothing), over the
// blockIdx.z-th of gridDim.z shares of K's BK-column chunks. Each stage of the ring (frag_smem_sizes.h) holds one
// chunk of K of:
//   x:       the block's rows, 16-byte chunks XOR-swizzled so the copies and the ldmatrix.x4 reads of 8 rows hit
//            8 different 16-byte bank groups (rows past M zero-filled);
//   codes:   the WN tiles' BK / 16 k-tiles of 16 x 64 weights as the layout stores them, so a lane's 16 bytes of a
//            k-tile sit at 16 lane: one conflict-free 128-bit shared load per lane and k-tile (two for INT8);
//   scales and zeros of the chunk's group for each tile, copied with the chunk so that a group's first stage
//            finds them landed (a load from global there would stall the warp once per group).
// A lane dequantizes its B fragments (LOP3 / PRMT magic numbers, frag_linear.cuh) and multiplies each fp16
// (q - z) by its column's scale, rounding the weight once as the AWQ reference does; the MF fragment rows of A
// share each of them. The copies, commits, waits and barriers are gemm_pipeline.cuh's.
// Split along K (gridDim.z > 1): fp32 partials in ws[z][M][N], summed by the last block of the output tile to
// arrive (counted in locks[], reset to 0): no second launch and no memset.
#include "kernels_src/common/gemm_pipeline.cuh"
#include "kernels_src/common/splitk.cuh"
#include "kernels_src/fraglinear/frag_linear.cuh"
#include "kernels_src/fraglinear/frag_smem_sizes.h"

template <int BITS, int MF, int WM, int WN, int STAGES, int BK>
__global__ void __launch_bounds__(WM * WN * 32, 1)
    frag_smem_gemm_kernel(const __half* x, const uint32_t* bq, const __half* bs, const uint32_t* bz, __half* y,
                          float* ws, unsigned* locks, int M, int N, int K, int G) {
  qt::grid_dependency_entry();
  constexpr int THREADS = WM * WN * 32, WROWS = 16 * MF, BM = WM * WROWS, KS = BK / 16;
  constexpr int ROW = BK * 2, CHUNKS = BK / 8;  // bytes and 16-byte chunks of one row of x in a stage
  constexpr int TILE_BYTES = (int)frag_wgmma::weight_tile_bytes(BITS);
  constexpr int CODE_OFF = (int)frag_smem::x_bytes(BM, BK);
  constexpr int SCALE_OFF = CODE_OFF + (int)frag_smem::code_bytes(BITS, WN, BK);
  constexpr int STAGE_BYTES = (int)frag_smem::stage_bytes(BITS, BM, WN, BK);
  static_assert(BK == 32 || BK == 64, "stages of 32 or 64 columns of K");
  static_assert(STAGE_BYTES % 128 == 0, "every stage starts on a 128-byte boundary, as x's swizzle assumes");
  // A tile's scales and zeros of one group, as they lie in global memory and in the stage, and the 16-byte runs
  // that copy them.
  constexpr int SCALE_TILE = (int)frag_smem::tile_scale_bytes(), ZERO_TILE = (int)frag_smem::tile_zero_bytes(BITS);
  constexpr int SCALE_RUNS = SCALE_TILE / 16, ZERO_RUNS = ZERO_TILE / 16;
  constexpr int ZERO_OFF = SCALE_OFF + (int)frag_smem::scale_bytes(WN);
  QT_DYNAMIC_SHARED(smem, unsigned char);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp / WN, wn = warp % WN;
  const int g8 = lane >> 2;
  const int n_tiles = (N + 63) / 64, ktiles = K / 16, groups = K / G;
  const int tile0 = blockIdx.x * WN, m0 = blockIdx.y * BM;
  const KTileRange range = split_k_range(K / BK);
  const uint32_t smem_base = qt::smem_u32(smem);

  // Chunk ch of row r of x sits at chunk ch ^ swz(r): 8 consecutive rows read at one chunk land in 8 different
  // 16-byte bank groups (128-byte rows: r & 7; 64-byte rows, two per 128 bytes: the row pair's index).
  auto swz = [](int r) { return BK == 64 ? (r & 7) : ((r >> 1) & 3); };

  // Each thread's copies are the same every stage but for the chunk's K offset and the slot, so their sources
  // are set up once. x: X_PER (row, chunk) pairs; codes: CODE_PER 16-byte runs of a tile's chunk, copy i at
  // byte 16 i of the codes; scales and zeros: one 16-byte run for the first SZ_COPIES threads, thread i's at
  // byte 16 i after the codes (each tile's 8 runs of scales, then each tile's 4 of zeros).
  constexpr int X_COPIES = BM * CHUNKS, X_PER = (X_COPIES + THREADS - 1) / THREADS;
  constexpr int TILE_RUNS = KS * TILE_BYTES / 16, CODE_COPIES = WN * TILE_RUNS;
  constexpr int CODE_PER = (CODE_COPIES + THREADS - 1) / THREADS;
  constexpr int SZ_COPIES = WN * (SCALE_RUNS + ZERO_RUNS);
  static_assert(SZ_COPIES <= THREADS, "one scale or zero run per thread at most");
  const __half* x_src[X_PER];
  uint32_t x_dst[X_PER], x_fill[X_PER];
#pragma unroll
  for (int j = 0; j < X_PER; ++j) {
    const int i = min(tid + j * THREADS, X_COPIES - 1);
    const int r = i / CHUNKS, ch = i % CHUNKS, row = m0 + r;
    x_src[j] = x + (int64_t)min(row, M - 1) * K + ch * 8;  // valid even when zero-filled
    x_dst[j] = smem_base + r * ROW + ((ch ^ swz(r)) << 4);
    x_fill[j] = row < M ? 16u : 0u;
  }
  const unsigned char* code_src[CODE_PER];
#pragma unroll
  for (int j = 0; j < CODE_PER; ++j) {
    const int i = min(tid + j * THREADS, CODE_COPIES - 1), tile = min(tile0 + i / TILE_RUNS, n_tiles - 1);
    code_src[j] = reinterpret_cast<const unsigned char*>(bq) + (int64_t)tile * ktiles * TILE_BYTES + (i % TILE_RUNS) * 16;
  }
  const unsigned char* sz_src = nullptr;
  int sz_group_bytes = 0;  // the run's step from one group to the next
  if (tid < WN * SCALE_RUNS) {
    const int tile = min(tile0 + tid / SCALE_RUNS, n_tiles - 1);
    sz_src = reinterpret_cast<const unsigned char*>(bs) + ((int64_t)tile * groups * SCALE_TILE + (tid % SCALE_RUNS) * 16);
    sz_group_bytes = SCALE_TILE;
  } else if (BITS == 4 && tid < SZ_COPIES) {
    const int run = tid - WN * SCALE_RUNS, tile = min(tile0 + run / ZERO_RUNS, n_tiles - 1);
    sz_src = reinterpret_cast<const unsigned char*>(bz) + ((int64_t)tile * groups * ZERO_TILE + (run % ZERO_RUNS) * 16);
    sz_group_bytes = ZERO_TILE;
  }

  auto load = [&](int slot, int t) {
    const int c = range.begin + t;  // the chunk of K
    const uint32_t stage = slot * STAGE_BYTES;
#pragma unroll
    for (int j = 0; j < X_PER; ++j)
      if (X_COPIES % THREADS == 0 || tid + j * THREADS < X_COPIES)
        qt::cp_async_cg16(x_dst[j] + stage, x_src[j] + c * BK, x_fill[j]);
#pragma unroll
    for (int j = 0; j < CODE_PER; ++j)
      if (CODE_COPIES % THREADS == 0 || tid + j * THREADS < CODE_COPIES)
        qt::cp_async_cg16(smem_base + stage + CODE_OFF + (tid + j * THREADS) * 16,
                          code_src[j] + (int64_t)c * KS * TILE_BYTES);
    if (tid < SZ_COPIES)
      qt::cp_async_cg16(smem_base + stage + SCALE_OFF + tid * 16, sz_src + (int64_t)(c * BK / G) * sz_group_bytes);
  };

  float acc[MF][8][4];
  zero_accumulators(acc);
  // This lane's ldmatrix offset in a stage, per fragment row, at k-step 0; k-step kk XORs kk << 5 on it (the
  // chunk 2 kk + (lane >> 4) under the swizzle: bits 5 and 6 come from the chunk alone).
  uint32_t a_rd[MF];
#pragma unroll
  for (int mf = 0; mf < MF; ++mf) {
    const int r = wm * WROWS + mf * 16 + (lane & 15);
    a_rd[mf] = r * ROW + (((lane >> 4) ^ swz(r)) << 4);
  }
  frag::Zeros4 z;
  uint32_t sc[8];  // the scale of this lane's B column 8 f + g, in both halves

  auto compute = [&](int slot, int t) {
    const int c = range.begin + t;
    const unsigned char* stage = smem + slot * STAGE_BYTES;
    if (t == 0 || c * BK % G == 0) {  // the chunk opens a group, or the block's range: its scales and zeros
      const unsigned short* s16 = reinterpret_cast<const unsigned short*>(stage + SCALE_OFF + wn * SCALE_TILE);
#pragma unroll
      for (int f = 0; f < 8; ++f) {
        const uint32_t s = s16[32 * (f >> 2) + 8 * (g8 >> 1) + 2 * (f & 3) + (g8 & 1)];
        sc[f] = s | (s << 16);
      }
      if constexpr (BITS == 4)
        frag::zeros_from_words(*reinterpret_cast<const uint2*>(stage + ZERO_OFF + wn * ZERO_TILE + 8 * g8), z);
    }
    const uint32_t x_stage = smem_base + slot * STAGE_BYTES;
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      uint32_t a[MF][4];
#pragma unroll
      for (int mf = 0; mf < MF; ++mf) qt::ldmatrix_x4(a[mf], x_stage + (a_rd[mf] ^ (kk << 5)));
      const unsigned char* codes = stage + CODE_OFF + (wn * KS + kk) * TILE_BYTES + lane * 16;
      uint32_t b[8][2];
      if constexpr (BITS == 4) {
        const uint4 v = *reinterpret_cast<const uint4*>(codes);
#pragma unroll
        for (int i = 0; i < 4; ++i) frag::unpack4((&v.x)[i], z, i, b);
      } else {
        const uint4 v[2] = {*reinterpret_cast<const uint4*>(codes), *reinterpret_cast<const uint4*>(codes + 512)};
#pragma unroll
        for (int f = 0; f < 8; ++f) frag::unpack8((&v[f >> 2].x)[f & 3], b[f]);
      }
#pragma unroll
      for (int f = 0; f < 8; ++f) b[f][0] = qt::mul_f16x2(b[f][0], sc[f]), b[f][1] = qt::mul_f16x2(b[f][1], sc[f]);
#pragma unroll
      for (int mf = 0; mf < MF; ++mf)
#pragma unroll
        for (int f = 0; f < 8; ++f) qt::mma_m16n8k16_f16(acc[mf][f], a[mf], b[f], acc[mf][f]);
    }
  };
  cp_async_pipeline<STAGES>(range.count, load, compute);

  const int n0 = tile0 * 64;
  store_mma_tile<MF, 8, 64>(acc, y, ws, m0 + wm * WROWS, n0, wn, lane, M, N);
  if (gridDim.z == 1) return;
  // In-launch reduction: the last block of this output tile to finish sums every split's partials.
  if (!last_block_to_arrive(&locks[blockIdx.y * gridDim.x + blockIdx.x], gridDim.z)) return;
  sum_split_partials<THREADS>(ws, y, m0, n0, min(BM, M - m0), min(WN * 64, N - n0), M, N);
}
