#pragma once
// Decode GEMV (M <= 16) on the frag layout (frag_layout.h), INT4 (AWQ zeros) or INT8 (+128 bias), designed
// for the bytes in flight that DRAM needs rather than for the fewest instructions per weight.
//
// Little's law: an SM keeps bandwidth x latency / SMs of loads in flight to stream at the DRAM's rate, about
// 4.8 TB/s x 0.7 us / 132 = 25 KB on an H200. frag_linear's GEMV has each warp own a column tile and share a
// cp.async A ring with the block's other warps, so a block waits at a barrier per A stage and, on the model's
// narrow layers, the grid holds a few warps per SM with two tiles each in flight (under 8 KB). Here:
//   - the KW warps of a block share one set of TN column tiles and split its K range between them, so a
//     narrow layer still puts many warps on every SM (the grid is column tiles x splits, each KW warps wide);
//   - each warp streams its own K range with a ring of PF tiles (512 bytes each for INT4, 1 KB for INT8), loads
//     predicated at the range's end, and no barrier until the end. RING = 0 keeps the ring in registers, where
//     ptxas waits for the whole ring at each trip (see RING below); RING = 1 keeps it in shared memory, filled by
//     each lane's own cp.async, with PF - 1 steps in flight (RING = 2: the same ring, its loop a step a trip so that
//     it runs across groups whose steps PF does not divide). The static model states each point's bytes in
//     flight per SM;
//   - x is read straight from global memory (it is K x M fp16, a few KB, and stays in L1 and L2) as the mma
//     A fragment, as far ahead as the weights: into a register ring of its own (RING = 0) or into the weights'
//     slots (RING = 1);
//   - scales (folded once per group, as frag_linear's FOLD) and INT4 zeros of the next group are loaded while
//     the current group runs;
//   - the warps' partial sums meet in shared memory at the end, warp order fixed; a split along K across
//     blocks (gridDim.z) adds the last-block reduction of the same launch: no second launch, no memset.
// SWIGLU = 1 (TN = 2): the MLP front in one launch, over the gate and up projections stored as one matrix of
// N = 2H columns, [gate | up] (whole 64-column tiles each). A block's two tiles are gate tile i and up tile i,
// which its lanes hold at the same (row, column) positions, so the epilogue writes h[M][H] = fp16(silu(g) * u)
// straight from the accumulators (from the summed partials where K is split): no gate/up round trip through
// memory and no SwiGLU launch. Two tiles of per-group partials would not fit the registers beside their sums,
// so this mode scales each weight in fp16 before its mma, (q - z) * s rounded once as the frag GEMM does.
//
// FUSE takes a decode step's two RMSNorm launches into the GEMVs on either side of them:
//   kFuseNorm (the q|k|v and gate|up GEMVs): x is the hidden state h, and the mma's A operand is RMSNorm(h),
//     fp16(nw * (h * inv)) as the rmsnorm kernel writes it. Every block finds its rows' inv itself (a few KB of
//     h from L2, while its first weight tiles are already in flight), so no block waits for another and the
//     normalized row never goes through memory;
//   kFuseResidual (o_proj and down_proj): y is the hidden state, and the output is added to it,
//     y = fp16(y + fp16(x W)), the two roundings of the unfused GEMV and residual add. Each output is read and
//     written by the one thread that stores it, and nothing else in the launch reads y, so y is updated in place;
//   kFuseResidualNorm (o_proj before a MoE block, whose router and experts both read the normalized row): as
//     kFuseResidual, and then the last block to finish a column tile of the block's rows (the tile's only block,
//     or its splits' last) that finds every column tile of those rows finished normalizes them into yn,
//     fp16(nw * (y * inv)) as the rmsnorm kernel writes it: the norm launch after o_proj folded into its tail.
//
// ROUTE runs a MoE block's experts at decode, on experts stored in the frag layout one after another in each
// array (as kernels_src/moe_wgmma keeps them), straight from the router's logits: no gating launch, no block
// alignment, no reduction launch and no finalize. Each block picks its token's top-k experts from the logits
// itself (moe_topk.cuh, moe_gating's rule, one warp, while no weight tile can be in flight yet), then:
//   kRouteRows (gate|up, SWIGLU): block row y is routed row i = t * top_k + j; it reads x's token row t, choice
//     j's gate tile from (bq, bs, bz) and its up tile from (uq, us, uz), and writes h[i] = silu(g) * u;
//   kRouteCombine (down): block row y is token t, and z = j * splits + s is the s-th share of K of its j-th
//     routed row: x is h [count][K], choice j's matrix, and the last block of the token's column tile to
//     arrive sums out[t] = sum_j w_j * fp16(y_i) over the fp32 partials in ws, the grouped GEMM's and
//     moe_finalize's roundings; with kFuseResidual it adds that into the hidden state out[t] in place.
// Each routed row is one row of the mma (M = 1 per block): a GEMV is bound by the weights, and at decode the
// rows of a token go to distinct experts, so no expert's weights are read twice. The logits are the router's
// output, so under PDL the first weight tiles wait for it.
#include "kernels_src/common/qt_cuda.h"
#include "kernels_src/common/qt_vec.h"
#include "kernels_src/common/splitk.cuh"
#include "kernels_src/fraglinear/frag_layout_map.h"
#include "kernels_src/fraglinear/frag_linear.cuh"
#include "kernels_src/fraglinear/frag_stream_sizes.h"
#include "kernels_src/gate_up/gate_up_common.cuh"
#include "kernels_src/moe/moe_topk.cuh"

namespace frag_stream {

// The mma A fragment of x's 16 x 16 block at rows m0.., columns k0..: a0 (row g, cols 2t, 2t+1), a1 (row g + 8),
// a2 (row g, cols 2t + 8, 2t + 9), a3 (row g + 8). Rows at or past M are zero and not read.
__device__ __forceinline__ void load_a(const __half* x, int K, int M, int m0, int k0, int g8, int t4,
                                       uint32_t (&a)[4]) {
  const int r0 = m0 + g8, r1 = r0 + 8;
  const uint32_t* p0 = reinterpret_cast<const uint32_t*>(x + (int64_t)r0 * K + k0 + 2 * t4);
  const uint32_t* p1 = reinterpret_cast<const uint32_t*>(x + (int64_t)r1 * K + k0 + 2 * t4);
  a[0] = r0 < M ? p0[0] : 0u;
  a[2] = r0 < M ? p0[4] : 0u;
  a[1] = r1 < M ? p1[0] : 0u;
  a[3] = r1 < M ? p1[4] : 0u;
}

// The norm weights an A fragment of RMSNorm(x) needs at columns k0..: w[0] at 2t, 2t + 1 and w[1] at 2t + 8, 2t + 9.
__device__ __forceinline__ void load_nw(const float* nw, int k0, int t4, float2 (&w)[2]) {
  w[0] = *reinterpret_cast<const float2*>(nw + k0 + 2 * t4);
  w[1] = *reinterpret_cast<const float2*>(nw + k0 + 2 * t4 + 8);
}

// The A fragment of RMSNorm(x) from x's raw fragment (load_a), its norm weights (load_nw) and the 1/rms of rows g
// (i0) and g + 8 (i1): each element fp16(nw * (x * inv)), the rmsnorm kernel's rounding.
__device__ __forceinline__ void normalize_a(const uint32_t (&raw)[4], const float2 (&w)[2], float i0, float i1,
                                            uint32_t (&a)[4]) {
  a[0] = qt::cvt_f16x2(w[0].x * (qt::f16_lo(raw[0]) * i0), w[0].y * (qt::f16_hi(raw[0]) * i0));
  a[1] = qt::cvt_f16x2(w[0].x * (qt::f16_lo(raw[1]) * i1), w[0].y * (qt::f16_hi(raw[1]) * i1));
  a[2] = qt::cvt_f16x2(w[1].x * (qt::f16_lo(raw[2]) * i0), w[1].y * (qt::f16_hi(raw[2]) * i0));
  a[3] = qt::cvt_f16x2(w[1].x * (qt::f16_lo(raw[3]) * i1), w[1].y * (qt::f16_hi(raw[3]) * i1));
}

// inv[r] = 1 / rms of row r of `src` (rows of `len` fp16 values, len a multiple of 8) for r < rows (<= 16), 0 past
// them: every warp a strided share of each row, 8 values a load (at one token and len = 4096, 4096 / (KW x 256)
// loads a lane, not one warp's 16 in a chain), the warps' sums meeting in `ss` in warp order. A block-wide call.
template <int KW>
__device__ __forceinline__ void rows_inv_rms(const __half* src, int len, int rows, float eps, float (&ss)[16][KW],
                                             float (&inv)[16]) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (int r = 0; r < rows; ++r) {
    const __half* row = src + (int64_t)r * len;
    float s = 0.0f;
#pragma unroll 4
    for (int c = (warp * 32 + lane) * 8; c < len; c += KW * 256) {
      float v[8];
      qt::load_f16<8>(row + c, v);
#pragma unroll
      for (int e = 0; e < 8; ++e) s += v[e] * v[e];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) ss[r][warp] = s;
  }
  __syncthreads();
  if (tid < 16) {
    float s = 0.0f;
    for (int w = 0; w < KW; ++w) s += tid < rows ? ss[tid][w] : 0.0f;
    inv[tid] = tid < rows ? rsqrtf(s / (float)len + eps) : 0.0f;
  }
  __syncthreads();
}

// y = fp16(y + fp16(v)): the residual add of kFuseResidual, with the unfused path's two roundings.
__device__ __forceinline__ void add_residual(__half* y, float v) {
  *y = __float2half_rn(__half2float(*y) + __half2float(__float2half_rn(v)));
}

}  // namespace frag_stream

constexpr int kFuseNone = 0, kFuseNorm = 1, kFuseResidual = 2, kFuseResidualNorm = 3;
constexpr int kRouteNone = 0, kRouteRows = 1, kRouteCombine = 2;

// Grid: x = column-tile groups of TN tiles (SWIGLU: gate tiles), y = 16-row blocks of M, z = splits of K
// (whole groups). Block: KW warps on the same TN tiles, each a contiguous share of the block's groups.
// SWIGLU: N is the concatenation's 2H columns, y is h [M][H], ws holds [split][M][2H] partials.
// nw, eps: kFuseNorm's RMSNorm weights [K] and epsilon, or kFuseResidualNorm's [N] with its output yn [M][N]
// (unread otherwise). uq, us, uz: kRouteRows's up matrix;
// logits [tokens][experts], top_k, renormalize: ROUTE's gating, over EPL experts per lane (unread otherwise).
// Under ROUTE, N is one expert's columns (kRouteRows: 2H, its gate and up together) and M the tokens.
template <int BITS, int KW, int PF, int TN, int SWIGLU = 0, int FUSE = kFuseNone, int ROUTE = kRouteNone, int EPL = 1,
          int RING = 0>
__global__ void __launch_bounds__(KW * 32)
    frag_stream_gemv_kernel(const __half* x, const uint32_t* bq, const __half* bs, const uint32_t* bz, __half* y,
                            float* ws, unsigned* locks, int M, int N, int K, int G, const float* nw, float eps,
                            const uint32_t* uq, const __half* us, const uint32_t* uz, const __half* logits,
                            int experts, int top_k, int renormalize, __half* yn) {
  // PDL: before the wait, the block's index math and its first weight tiles (PF steps', PF - 1 on the shared
  // ring): weights are written once at load, never in a step, so under programmatic launch their DRAM latency
  // overlaps the previous kernel's tail. (Not under ROUTE: which expert's tiles depends on the router's logits.)
  static_assert(!SWIGLU || TN == 2, "the SwiGLU epilogue pairs a gate tile with its up tile");
  static_assert(RING >= 0 && RING <= 2, "RING: 0 registers, 1 shared, 2 shared across groups");
  static_assert(!RING || PF >= 2, "the shared ring keeps PF - 1 steps in flight: at least one");
  static_assert(FUSE >= kFuseNone && FUSE <= kFuseResidualNorm, "FUSE: none, norm, residual or residual + norm");
  constexpr bool RESIDUAL = FUSE == kFuseResidual || FUSE == kFuseResidualNorm;
  static_assert(!(SWIGLU && RESIDUAL), "the SwiGLU output is no residual stream");
  static_assert(!(ROUTE && FUSE == kFuseResidualNorm), "the routed GEMVs leave the norm to the next layer");
  static_assert(ROUTE == kRouteNone || (ROUTE == kRouteRows && SWIGLU) || (ROUTE == kRouteCombine && !SWIGLU),
                "ROUTE: routed gate|up rows with SwiGLU, or the down projection combined per token");
  static_assert(ROUTE != kRouteCombine || FUSE != kFuseNorm, "the down projection's input is h, not the hidden state");
  constexpr int THREADS = KW * 32, NF = 8 * TN, OTHERS = KW - 1 + (KW == 1);  // warps 1.. (one slot at KW = 1)
  constexpr bool FOLD = !SWIGLU;  // scales folded once per group into fp32 sums, or applied to each weight
  using Tile = frag::BTile<BITS>;
  static_assert(Tile::LOADS == frag_stream_sizes::tile_pieces(BITS), "a tile's pieces as the host sizes the ring");
  // The warps' partial sums at the end. The shared ring's kernel puts them in the ring once it has drained (the
  // host sizes it for both, frag_stream_sizes::ring_smem_bytes): 12 KB less static shared memory a 4-warp block,
  // a third block an SM on sm_86's 100 KB.
  QT_SHARED_ALIGNED(red_static, 16, float[RING ? 1 : OTHERS][RING ? 1 : NF * 4][32]);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g8 = lane >> 2, t4 = lane & 3;
  const int n_tiles = (N + 63) / 64, ktiles = K / 16, groups = K / G, spg = G / 16;  // spg: k-steps per group
  const int nt = blockIdx.x * (SWIGLU ? 1 : TN);
  // past N: the last tile again, not stored. SWIGLU: tile 1 is the up tile of gate tile nt, H / 64 further
  // (ROUTE: tile nt of the up matrix).
  auto tile_of = [&](int j) { return SWIGLU ? nt + (ROUTE ? 0 : j * (n_tiles / 2)) : min(nt + j, n_tiles - 1); };
  const int m0 = ROUTE ? 0 : blockIdx.y * 16;
  // ROUTE: the block's routed row, its splits of K, and its rows of x, y and ws as a one-row problem.
  const int splits = ROUTE == kRouteCombine ? (int)gridDim.z / top_k : (int)gridDim.z;
  const int zsplit = ROUTE == kRouteCombine ? (int)blockIdx.z % splits : (int)blockIdx.z;
  const int route_row = ROUTE == kRouteRows ? (int)blockIdx.y : (int)blockIdx.y * top_k + (int)blockIdx.z / max(splits, 1);
  if constexpr (ROUTE != kRouteNone) {
    x += (int64_t)(ROUTE == kRouteRows ? route_row / top_k : route_row) * K;
    y += (int64_t)(ROUTE == kRouteRows ? route_row : (int)blockIdx.y) * (ROUTE == kRouteRows ? N / 2 : N);
    ws += (int64_t)blockIdx.y * gridDim.z * N;
    M = 1;
  }

  // The block's groups, then this warp's share of them.
  const int per_split = (groups + splits - 1) / splits;
  const int b_begin = min(groups, zsplit * per_split), b_end = min(groups, b_begin + per_split);
  const int per_warp = (b_end - b_begin + KW - 1) / KW;
  const int g_begin = min(b_end, b_begin + warp * per_warp), g_end = min(b_end, g_begin + per_warp);
  const int steps = (g_end - g_begin) * spg;
  const int k_first = g_begin * 16 * spg;

  const uint64_t policy = qt::policy_evict_first();
  // Tile j's words, scales and zeros lie j strides past tile 0's: the next column tile, the up tile H / 64
  // further, or (ROUTE) the up matrix's tile, as far from the gate matrix's as uq is from bq.
  const int64_t tile_step = (int64_t)(tile_of(TN - 1) - tile_of(0)) / max(TN - 1, 1);
  const bool two = ROUTE == kRouteRows;
  const int64_t bstride = two ? (int64_t)(reinterpret_cast<uint64_t>(uq) - reinterpret_cast<uint64_t>(bq)) / 4
                              : tile_step * ktiles * Tile::WORDS;
  const int64_t sstride = two ? (int64_t)(reinterpret_cast<uint64_t>(us) - reinterpret_cast<uint64_t>(bs)) / 2
                              : tile_step * groups * 64;
  const int64_t zstride = two ? (int64_t)(reinterpret_cast<uint64_t>(uz) - reinterpret_cast<uint64_t>(bz)) / 4
                              : tile_step * groups * 16;
  const uint32_t* btile = bq + ((int64_t)tile_of(0) * ktiles + g_begin * spg) * Tile::WORDS + lane * 4;

  // The rings: step s lives in slot s % PF (RING = 0: PF divides spg, so a group's steps start at slot 0).
  // RING = 0: in registers. Every load of a trip shares one of the warp's few scoreboards, and ptxas waits for a
  // scoreboard to empty, never for its oldest load (global loads complete out of order): the copy of the x
  // fragments into the ring at the trip's end waits for every tile in flight, so the ring drains once a trip
  // (sm_90 SASS of this kernel, results/stream-gemv-ring.md).
  // RING = 1: in shared memory, filled by cp.async. Each lane copies and reads back only its own 16-byte pieces
  // (the frag layout gives a lane its tile words, and the A fragment is its own), so the ring needs no barrier;
  // a step waits for its own cp.async group, and the groups complete in order (cp.async.wait_group), so PF - 1
  // steps stay in flight. A slot holds TN x LOADS B pieces, the A fragment's four words and, under kFuseNorm, its
  // norm weights; piece q of slot p of thread t is at (p x PIECES + q) x THREADS + t, so a warp's 16-byte reads
  // of a piece are 512 contiguous bytes.
  constexpr int BP = TN * Tile::LOADS, PIECES = BP + 1 + (RING && FUSE == kFuseNorm ? 1 : 0);
  static_assert(!RING || PIECES == frag_stream_sizes::slot_pieces(BITS, TN, FUSE == kFuseNorm), "a slot as sized");
  Tile ring[RING ? 1 : TN][RING ? 1 : PF];
  uint32_t aring[RING ? 1 : PF][4];
  QT_DYNAMIC_SHARED(stream_ring, uint4);
  auto piece = [&](int slot, int q) { return qt::smem_u32(&stream_ring[(slot * PIECES + q) * THREADS + tid]); };
  auto issue_b = [&](int step, int slot) {
#pragma unroll
    for (int j = 0; j < TN; ++j)
#pragma unroll
      for (int i = 0; i < Tile::LOADS; ++i)
        qt::cp_async_cg16_hint(piece(slot, j * Tile::LOADS + i), btile + j * bstride + step * Tile::WORDS + i * 128,
                               policy);
  };
  auto first_tiles = [&]() {
#pragma unroll
    for (int p = 0; p < PF; ++p) {
      if (RING && p == PF - 1) break;  // the shared ring keeps PF - 1 steps in flight
      if (p < steps) {
        if constexpr (RING) {
          issue_b(p, p);
        } else {
#pragma unroll
          for (int j = 0; j < TN; ++j)
            frag::load_tile<BITS>(btile + j * bstride + p * Tile::WORDS, policy, ring[j][p]);
        }
      }
    }
  };
  if constexpr (ROUTE == kRouteNone) first_tiles();
  qt::grid_dependency_entry();  // x, y, ws, the locks and the logits are the previous kernels' from here on
  QT_SHARED(route_id, int[32]);
  QT_SHARED(route_w, float[32]);
  if constexpr (ROUTE != kRouteNone) {
    // The token's top-k, as the gating kernel picks them; then this routed row's expert's share of each
    // array, as the grouped GEMMs index them.
    if (warp == 0) {
      const int token = ROUTE == kRouteRows ? route_row / top_k : (int)blockIdx.y;
      int id;
      float w;
      moe_topk_warp<EPL>(logits + (int64_t)token * experts, experts, top_k, renormalize, lane, id, w);
      if (lane < top_k) route_id[lane] = id, route_w[lane] = w;
    }
    __syncthreads();
    // (A row of NaN logits picks no expert: clamped, it reads garbage, never out of bounds.)
    const int64_t e = min(max(route_id[route_row % top_k], 0), experts - 1), cols = ROUTE == kRouteRows ? N / 2 : N;
    btile += e * frag_map::weight_words(BITS, cols, K);
    bs += e * frag_map::scale_halves(cols, K, G);
    if (BITS == 4) bz += e * frag_map::zero_words(BITS, cols, K, G);
    first_tiles();
  }

  // kFuseNorm: 1 / rms of the block's 16 rows (0 past M), while the weight tiles above are in flight. The sum of
  // squares is over the whole row, whatever share of K this block multiplies.
  QT_SHARED(row_inv, float[16]);
  QT_SHARED(row_ss, float[16][KW]);
  if constexpr (FUSE == kFuseNorm)
    frag_stream::rows_inv_rms<KW>(x + (int64_t)m0 * K, K, min(16, M - m0), eps, row_ss, row_inv);
  // kFuseNorm: the ring holds x's raw fragment and its norm weights, normalized when the step uses them (DEFER).
  // Normalizing at the refill waits there on the loads just issued: an L2 round trip every k-step. The gate|up
  // form normalizes at the refill still: its two tiles' rings and sums leave no room for 4 more registers a slot
  // (12 bytes of spills on sm_90 at pf = 4).
  constexpr bool DEFER = FUSE == kFuseNorm && !SWIGLU;
  float2 nring[DEFER ? PF : 1][2];
  float inv0 = 0.0f, inv1 = 0.0f;
  if constexpr (FUSE == kFuseNorm) inv0 = row_inv[g8], inv1 = row_inv[g8 + 8];
  // RING = 1: step `step`'s A fragment (and norm weights) into its slot; rows past M are zero-filled.
  auto issue_a = [&](int step, int slot) {
    const int k0 = k_first + 16 * step, r0 = m0 + g8, r1 = r0 + 8;
    const __half* p0 = x + (int64_t)min(r0, M - 1) * K + k0 + 2 * t4;
    const __half* p1 = x + (int64_t)min(r1, M - 1) * K + k0 + 2 * t4;
    const uint32_t a = piece(slot, BP);
    qt::cp_async_ca<4>(a, p0, r0 < M ? 4u : 0u);
    qt::cp_async_ca<4>(a + 4, p1, r1 < M ? 4u : 0u);
    qt::cp_async_ca<4>(a + 8, p0 + 8, r0 < M ? 4u : 0u);
    qt::cp_async_ca<4>(a + 12, p1 + 8, r1 < M ? 4u : 0u);
    if constexpr (FUSE == kFuseNorm) {
      const uint32_t w = piece(slot, BP + 1);
      qt::cp_async_ca<8>(w, nw + k0 + 2 * t4);
      qt::cp_async_ca<8>(w + 8, nw + k0 + 2 * t4 + 8);
    }
  };
  auto load_a = [&](int k0, int slot) {
    frag_stream::load_a(x, K, M, m0, k0, g8, t4, aring[slot]);
    if constexpr (DEFER) {
      frag_stream::load_nw(nw, k0, t4, nring[slot]);
    } else if constexpr (FUSE == kFuseNorm) {
      float2 w[2];
      frag_stream::load_nw(nw, k0, t4, w);
      const uint32_t raw[4] = {aring[slot][0], aring[slot][1], aring[slot][2], aring[slot][3]};
      frag_stream::normalize_a(raw, w, inv0, inv1, aring[slot]);
    }
  };
  auto a_of = [&](int slot, uint32_t(&a)[4]) {
    if constexpr (DEFER) {
      frag_stream::normalize_a(aring[slot], nring[slot], inv0, inv1, a);
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) a[e] = aring[slot][e];
    }
  };
  if constexpr (RING) {
    // Group p holds step p's A fragment; group 0 also holds the B tiles of steps 0 .. PF - 2, issued above
    // (before the PDL wait where they could be): the group of step s is complete when step s's pieces are.
#pragma unroll
    for (int p = 0; p < PF - 1; ++p) {
      if (p < steps) issue_a(p, p);
      qt::cp_async_commit();
    }
  } else {
#pragma unroll
    for (int p = 0; p < PF; ++p)
      if (p < steps) load_a(k_first + 16 * p, p);
  }

  // This lane's scale and zero words of group grp: FOLD, the scales of its C columns (8f + 2t, +1) as
  // frag_linear's FOLD reads them; else the scale of fragment f's B column 8f + g in both halves of word f.
  uint4 sraw[TN][2];
  uint2 zraw[TN];
  auto load_group = [&](int grp) {
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int64_t tg = (int64_t)tile_of(0) * groups + grp;
      if constexpr (FOLD) {
#pragma unroll
        for (int r = 0; r < 2; ++r)
          sraw[j][r] = *reinterpret_cast<const uint4*>(bs + j * sstride + tg * 64 + 32 * r + 8 * t4);
      } else {
        const unsigned short* s16 = reinterpret_cast<const unsigned short*>(bs + j * sstride + tg * 64);
        uint32_t w[8];
#pragma unroll
        for (int f = 0; f < 8; ++f) {
          const uint32_t v = s16[32 * (f >> 2) + 8 * (g8 >> 1) + 2 * (f & 3) + (g8 & 1)];
          w[f] = v | (v << 16);
        }
        sraw[j][0] = make_uint4(w[0], w[1], w[2], w[3]);
        sraw[j][1] = make_uint4(w[4], w[5], w[6], w[7]);
      }
      if constexpr (BITS == 4) zraw[j] = *reinterpret_cast<const uint2*>(bz + j * zstride + tg * 16 + 2 * g8);
    }
  };
  if (steps > 0) load_group(g_begin);

  float acc[NF][4], part[FOLD ? NF : 1][4];
#pragma unroll
  for (int f = 0; f < NF; ++f)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[f][e] = 0.0f;
  const float zero4[4] = {0.0f, 0.0f, 0.0f, 0.0f};

  int s = 0;  // the warp's step, counted from its first
  // A trip of the step loop is U = PF steps, unrolled, so that each reads its ring's registers or slot by a constant
  // index: PF divides a group's steps. RING = 2 is the shared ring where PF does not divide them (Q8_0's groups of
  // 32 hold 2 steps): a step a trip, its slot rs = s % PF counted at run time across the groups, so PF - 1 steps stay
  // in flight at any group of 16 rows or more. It is its own kernel, which the host picks by the group: its trip
  // is 115 PTX instructions a step against the unrolled trip's 84 (sm_90a, INT4, PF = 8), where the INT4 GEMV nears
  // the issue rate at full bandwidth.
  constexpr bool ROLLED = RING == 2;
  constexpr int U = ROLLED ? 1 : PF;
  int rs = 0;
  for (int grp = g_begin; grp < g_end; ++grp) {
    // This group's constants from the words loaded a group ago; then the next group's words, in flight
    // while this group runs.
    frag::Zeros4 z[TN];
    uint32_t sc[TN][8];
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      if constexpr (BITS == 4) frag::zeros_from_words(zraw[j], z[j]);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        sc[j][4 * r] = sraw[j][r].x, sc[j][4 * r + 1] = sraw[j][r].y;
        sc[j][4 * r + 2] = sraw[j][r].z, sc[j][4 * r + 3] = sraw[j][r].w;
      }
    }
    if (grp + 1 < g_end) load_group(grp + 1);

    // The rolled ring's partials restart here; the unrolled loop's first step of the group starts them.
    if constexpr (ROLLED && FOLD) {
#pragma unroll
      for (int f = 0; f < NF; ++f)
#pragma unroll
        for (int e = 0; e < 4; ++e) part[f][e] = 0.0f;
    }
    for (int kk = 0; kk < spg; kk += U, s += U) {
#pragma unroll
      for (int p = 0; p < U; ++p) {
        uint32_t a[4];
        Tile cur_s[RING ? TN : 1];
        if constexpr (RING) {
          // This step's slot, then the slot the step before read refilled with the step PF - 1 ahead.
          const int slot = ROLLED ? rs : p;
          qt::cp_async_wait<PF - 2>();
#pragma unroll
          for (int j = 0; j < TN; ++j)
#pragma unroll
            for (int i = 0; i < Tile::LOADS; ++i)
              cur_s[j].v[i] = stream_ring[(slot * PIECES + j * Tile::LOADS + i) * THREADS + tid];
          const uint4 av = stream_ring[(slot * PIECES + BP) * THREADS + tid];
          const uint32_t raw[4] = {av.x, av.y, av.z, av.w};
          if constexpr (FUSE == kFuseNorm) {
            const uint4 wv = stream_ring[(slot * PIECES + BP + 1) * THREADS + tid];
            const float2 w[2] = {make_float2(__uint_as_float(wv.x), __uint_as_float(wv.y)),
                                 make_float2(__uint_as_float(wv.z), __uint_as_float(wv.w))};
            frag_stream::normalize_a(raw, w, inv0, inv1, a);
          } else {
#pragma unroll
            for (int e = 0; e < 4; ++e) a[e] = raw[e];
          }
          const int ahead = s + p + PF - 1, fill = ROLLED ? (rs == 0 ? PF - 1 : rs - 1) : (p + PF - 1) % PF;
          if (ahead < steps) issue_b(ahead, fill), issue_a(ahead, fill);
          qt::cp_async_commit();
          if constexpr (ROLLED) rs = rs == PF - 1 ? 0 : rs + 1;
        } else {
          a_of(p, a);
          if (s + p + PF < steps) load_a(k_first + 16 * (s + p + PF), p);
        }
        const bool refill = !RING && s + p + PF < steps;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          uint32_t b[8][2];
          Tile& cur = RING ? cur_s[RING ? j : 0] : ring[RING ? 0 : j][RING ? 0 : p];  // the unused one has 1 tile
          if constexpr (BITS == 4) {
#pragma unroll
            for (int i = 0; i < 4; ++i) frag::unpack4((&cur.v[0].x)[i], z[j], i, b);
          } else {
#pragma unroll
            for (int f = 0; f < 8; ++f) frag::unpack8((&cur.v[f >> 2].x)[f & 3], b[f]);
          }
          if (refill) frag::load_tile<BITS>(btile + j * bstride + (s + p + PF) * Tile::WORDS, policy, cur);
#pragma unroll
          for (int f = 0; f < 8; ++f) {
            if constexpr (FOLD) {
              float(&c)[4] = part[8 * j + f];
              if (!ROLLED && kk == 0 && p == 0) qt::mma_m16n8k16_f16(c, a, b[f], zero4);
              else qt::mma_m16n8k16_f16(c, a, b[f], c);
            } else {
              const uint32_t bw[2] = {qt::mul_f16x2(b[f][0], sc[j][f]), qt::mul_f16x2(b[f][1], sc[j][f])};
              qt::mma_m16n8k16_f16(acc[8 * j + f], a, bw, acc[8 * j + f]);
            }
          }
        }
      }
    }
    // The group's partials times its fp32 scales, once per group and column.
    if constexpr (FOLD) {
#pragma unroll
      for (int f = 0; f < NF; ++f) {
        const uint32_t s2 = sc[f / 8][4 * ((f & 7) >> 2) + (f & 3)];
        const float s0 = __half2float(__ushort_as_half((unsigned short)(s2 & 0xffffu)));
        const float s1 = __half2float(__ushort_as_half((unsigned short)(s2 >> 16)));
        acc[f][0] += s0 * part[f][0];
        acc[f][1] += s1 * part[f][1];
        acc[f][2] += s0 * part[f][2];
        acc[f][3] += s1 * part[f][3];
      }
    }
  }

  if constexpr (RING) qt::cp_async_wait<0>();  // the groups left are empty: nothing lands after the loop

  // The warps' sums meet in warp 0, added in warp order.
  if (KW > 1) {
    float(*red)[NF * 4][32] = reinterpret_cast<float(*)[NF * 4][32]>(RING ? (void*)stream_ring : (void*)red_static);
    // Every lane's ring copies have landed (the wait above); the barrier keeps a warp's sums off the slots of a
    // warp still reading its ring.
    if constexpr (RING) __syncthreads();
    if (warp > 0) {
#pragma unroll
      for (int f = 0; f < NF; ++f)
#pragma unroll
        for (int e = 0; e < 4; ++e) red[warp - 1][f * 4 + e][lane] = acc[f][e];
    }
    __syncthreads();
    if (warp == 0) {
      for (int w = 0; w < KW - 1; ++w)
#pragma unroll
        for (int f = 0; f < NF; ++f)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[f][e] += red[w][f * 4 + e][lane];
    }
  }
  const int n0 = nt * 64;
  if constexpr (ROUTE == kRouteCombine) {
    // Always through the partials: even one split of one routed row is weighted.
    if (warp == 0) {
#pragma unroll
      for (int f = 0; f < NF; ++f)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = g8 + 8 * (e >> 1), col = n0 + 8 * f + 2 * t4 + (e & 1);
          if (row < M && col < N) ws[(int64_t)blockIdx.z * N + col] = acc[f][e];
        }
    }
  } else if constexpr (SWIGLU) {
    const int H = N / 2;
    if (warp == 0) {
      // acc[f] (gate) and acc[8 + f] (up) hold the same rows and columns: the C fragment of 8-column f.
#pragma unroll
      for (int f = 0; f < 8; ++f)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = m0 + g8 + 8 * (e >> 1), col = n0 + 8 * f + 2 * t4 + (e & 1);
          if (row >= M) continue;
          if (gridDim.z == 1) {
            y[(int64_t)row * H + col] = gate_up_swiglu(acc[f][e], acc[8 + f][e]);
          } else {
            ws[((int64_t)blockIdx.z * M + row) * N + col] = acc[f][e];
            ws[((int64_t)blockIdx.z * M + row) * N + H + col] = acc[8 + f][e];
          }
        }
    }
  } else if (RESIDUAL && warp == 0) {
    if (gridDim.z == 1) {
#pragma unroll
      for (int f = 0; f < NF; ++f)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = m0 + g8 + 8 * (e >> 1), col = n0 + 8 * f + 2 * t4 + (e & 1);
          if (row < M && col < N) frag_stream::add_residual(y + (int64_t)row * N + col, acc[f][e]);
        }
    } else {
#pragma unroll
      for (int f = 0; f < NF; ++f)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = m0 + g8 + 8 * (e >> 1), col = n0 + 8 * f + 2 * t4 + (e & 1);
          if (row < M && col < N) ws[((int64_t)blockIdx.z * M + row) * N + col] = acc[f][e];
        }
    }
  } else if (warp == 0) {
    float out[1][NF][4];
#pragma unroll
    for (int f = 0; f < NF; ++f)
#pragma unroll
      for (int e = 0; e < 4; ++e) out[0][f][e] = acc[f][e];
    store_mma_tile<1, NF, 64 * TN>(out, y, ws, m0, n0, 0, lane, M, N);
  }
  if (ROUTE == kRouteCombine || gridDim.z > 1) {
    // In-launch reduction across the splits: the last block of this output tile to finish sums every split's
    // partials.
    if (!last_block_to_arrive(&locks[blockIdx.y * gridDim.x + blockIdx.x], gridDim.z)) return;
    if constexpr (ROUTE == kRouteCombine) {
      // Each routed row's splits summed and rounded as the grouped GEMM's output, then weighted in j order as
      // moe_finalize sums them.
      const int cols = min(TN * 64, N - n0);
      for (int c = tid; c < cols; c += THREADS) {
        float sum = 0.0f;
        for (int j = 0; j < top_k; ++j) {
          float v = 0.0f;
          for (int z = 0; z < splits; ++z) v += ws[(int64_t)(j * splits + z) * N + n0 + c];
          sum += route_w[j] * __half2float(__float2half_rn(v));
        }
        if constexpr (RESIDUAL) frag_stream::add_residual(y + n0 + c, sum);
        else y[n0 + c] = __float2half_rn(sum);
      }
      return;
    }
    const int rows = min(16, M - m0);
    if constexpr (SWIGLU) {
      const int H = N / 2;
      for (int i = tid; i < rows * 64; i += THREADS) {
        const int row = m0 + i / 64, col = n0 + i % 64;
        float g = 0.0f, u = 0.0f;
        for (int z = 0; z < (int)gridDim.z; ++z) {
          g += ws[((int64_t)z * M + row) * N + col];
          u += ws[((int64_t)z * M + row) * N + H + col];
        }
        y[(int64_t)row * H + col] = gate_up_swiglu(g, u);
      }
      return;
    }
    const int cols = min(TN * 64, N - n0);
    for (int i = tid; i < rows * cols; i += THREADS) {
      const int row = m0 + i / cols, col = n0 + i % cols;
      float sum = 0.0f;
      for (int z = 0; z < (int)gridDim.z; ++z) sum += ws[((int64_t)z * M + row) * N + col];
      if constexpr (RESIDUAL) frag_stream::add_residual(y + (int64_t)row * N + col, sum);
      else y[(int64_t)row * N + col] = __float2half_rn(sum);
    }
  }
  if constexpr (FUSE == kFuseResidualNorm) {
    // This block finished its column tile of rows m0..: the last of the row block's tiles normalizes the rows
    // (counters past the tiles' own), reading y back from L2 as the rmsnorm kernel would.
    if (!last_block_to_arrive(&locks[gridDim.x * gridDim.y + blockIdx.y], gridDim.x)) return;
    const int rows = min(16, M - m0);
    frag_stream::rows_inv_rms<KW>(y + (int64_t)m0 * N, N, rows, eps, row_ss, row_inv);
    for (int i = tid; i < rows * N; i += THREADS) {
      const int r = i / N, c = i % N;
      yn[(int64_t)(m0 + r) * N + c] = __float2half_rn(nw[c] * (__half2float(y[(int64_t)(m0 + r) * N + c]) * row_inv[r]));
    }
  }
}
