#pragma once
// y[M][N] = x[M][K] * W on Hopper's warpgroup tensor cores (sm_90a), weights in the frag layout
// (frag_layout.h), INT4 (BITS = 4, AWQ zeros) or INT8 (BITS = 8, +128 bias), fp16 activations and output, fp32
// accumulation in wgmma.mma_async.
//
// The product is computed transposed, y^T = W^T x^T, so the quantized operand is wgmma's A, the one that may
// live in registers: weights are dequantized in registers and never touch shared memory, and only the
// activations (wgmma's B) are staged. The frag layout already holds W^T's A fragments: a lane's mma B
// fragments of columns 16 P + g and 16 P + 8 + g (fragments 2P, 2P + 1 of a 16 x 64 tile) at rows 2t.., 2t+8..
// are exactly the m64nNk16 A registers of rows g and g + 8 of a 16-row slab, {b0(2P), b0(2P+1), b1(2P),
// b1(2P+1)}. So the load-time repack is the one the mma.sync kernels use (Machete's idea: weights shuffled
// once into the order the tensor core's operand registers want; here that order is shared by both kernels).
//
// Block: WG warpgroups over 4 column tiles (256 output features) and BM rows of x (blockIdx.y), a range of
// 64-column K chunks (blockIdx.z of gridDim.z splits). Warp w of every warpgroup loads column tile w's
// fragments, warpgroup h the fragment pairs P = J h .. J h + J - 1 (J = 4 / WG): each k-step a warpgroup
// issues J wgmma m64nBMk16, one per pair, whose 64 A rows are the pair's 16 features of each of the 4 tiles.
//   x: BM rows x 64 columns of K per stage, cp.async into a ring of STAGES stages in the 128-byte-swizzled
//      K-major layout wgmma's descriptor reads (chunk j of row r at j ^ (r % 8), conflict-free for both the
//      copies and the tensor core). cp.async, not TMA: x is the small operand (the weights are the bytes), a
//      row-major 2-D tile needs a tensor map (cp.async.bulk.tensor) the device interface and the emulator do
//      not have, and 1-D bulk copies cannot write the swizzle.
//   W: each lane's words of one 16 x 64 tile come straight from global memory, PF tiles ahead in a register
//      ring (unpredicated: the last PF of a range read into the next one or the layout's padding tiles). Or,
//      at PF = 0, through shared memory: each lane copies (cp.async) the very words it will unpack into its own
//      slots of a ring of whole 64-column chunks, one chunk further ahead than x and in x's commit groups, so
//      that x's wait covers them and no barrier is needed (a thread reads only what it copied). The shared
//      ring holds STAGES - KIF chunks of 4 tiles in flight, which is what a loop bound by its loads' latency
//      needs (Little's law), and is the default. The register ring keeps no more than one tile in flight: ptxas
//      puts all its loads, and the group's scale and zero loads, on one scoreboard, and the first unpack of a
//      k-step's tile waits for that scoreboard to empty, the tile loaded a k-step before included: a DRAM round
//      trip every k-step (the H200 runs: about 0.46 us a k-step at every M up to 1,024; see
//      results/wgmma-weight-ring.md). The group scales and zeros: on the register ring, loaded a group ahead
//      into registers; on the shared ring, copied into each chunk's slot beside its weights (an entry for each
//      k-step that starts a group), the block's threads sharing the copies out, so they are read after the
//      barrier of the chunk whose commit group carried them, and no global load is left in the loop (a group of
//      32 is two k-steps, less than a round trip: loaded a group ahead, its wait would show). The fused gate/up
//      keeps loading its scales a group ahead: it has no registers to spare. Then
//      the magic-number unpack gives (q - z) in fp16 and one multiply by the row's scale the fp16 weight,
//      rounded once as the AWQ reference and the mma.sync GEMM round it. The next k-step's A is dequantized
//      while this k-step's wgmmas run (two A register sets), and each k-step's group is retired before its A
//      registers are written again, so ptxas keeps the wgmmas asynchronous.
//   KIF, the k-steps of wgmmas in flight: at 1 a warpgroup waits for each k-step's group before it issues the
//      next, so the tensor core drains and refills between k-steps unless another warpgroup fills the gap; at
//      2 it waits only for the k-step before (whose A set the next dequant overwrites), so the next group is
//      queued behind a running one. The price of 2: the last k-step of a stage is still reading it when the
//      threads meet at the next stage's barrier, so the ring refills the stage before that one, and keeps
//      STAGES - 2 stages of x in flight ahead instead of STAGES - 1.
// Split along K (gridDim.z > 1): fp32 partials in ws[z][M][N], summed by the last block of the output tile to
// arrive (counted in locks[], reset to 0), as in frag_linear.cuh: no second launch and no memset. Or (CS > 1) the
// gridDim.z = CS blocks of a K split form one thread block cluster (sm_90): each leaves its partial tile in its
// own shared memory, and each sums a 1 / CS share of the tile's rows over all of them through distributed shared
// memory. The partials never reach L2 or DRAM, the sum is spread over the cluster instead of falling to the last
// block, and there are no locks: what a split costs where M is small and K long.
#include "kernels_src/common/qt_vec.h"
#include "kernels_src/fraglinear/frag_linear.cuh"
#include "kernels_src/fraglinear/frag_wgmma_sizes.h"

namespace frag_wgmma {


// The words one lane of warpgroup h needs from a 16 x 64 tile: INT4 word P holds pair P; INT8 word f holds
// fragment f, the four of a half at 128 h' + 4 l.
template <int BITS, int J>
struct WTile {
  static constexpr int WORDS = BITS == 4 ? J : 2 * J;
  uint32_t w[WORDS];
};

// `p` points at this lane's first word of the tile (tile + 4 lane).
template <int BITS, int J>
__device__ __forceinline__ void load_wtile(const uint32_t* p, int h, uint64_t policy, WTile<BITS, J>& t) {
  constexpr int W = WTile<BITS, J>::WORDS;
  if constexpr (W == 8) {  // INT8, J = 4: both halves
    const uint4 a = qt::ldg_stream_u4(p, policy), b = qt::ldg_stream_u4(p + 128, policy);
    t.w[0] = a.x, t.w[1] = a.y, t.w[2] = a.z, t.w[3] = a.w, t.w[4] = b.x, t.w[5] = b.y, t.w[6] = b.z, t.w[7] = b.w;
  } else if constexpr (W == 4) {  // INT4 J = 4, or INT8 J = 2 (half h)
    const uint4 a = qt::ldg_stream_u4(p + (BITS == 4 ? 0 : 128 * h), policy);
    t.w[0] = a.x, t.w[1] = a.y, t.w[2] = a.z, t.w[3] = a.w;
  } else {
    // Part of a 16-byte run that the block's other warpgroups read too: a plain load, which L1 may share.
    const int first = BITS == 4 ? J * h : 128 * (h >> 1) + 2 * (h & 1);
    qt::load_words<W>(p + first, t.w);
  }
}

// One weight matrix in the frag layout: its codes, scales and (INT4) zeros, each at its first tile.
struct FragMatrix {
  const uint32_t* q;
  const __half* s;
  const uint32_t* z;
};

// The 64-column chunks of K: a block's range of them, [begin, begin + count).
struct ChunkRange {
  int begin, count;
};
__device__ __forceinline__ int k_chunks(int K) { return (K + kBK - 1) / kBK; }
// The blockIdx.z-th of gridDim.z equal shares (split-K over the grid).
__device__ __forceinline__ ChunkRange grid_split(int K) {
  const int total = k_chunks(K), per_split = (total + (int)gridDim.z - 1) / (int)gridDim.z;
  const int begin = min(total, (int)blockIdx.z * per_split);
  return {begin, min(total, begin + per_split) - begin};
}

// The main loop the Hopper kernels share: MATS weight matrices of N features (one, or the gate and up of a
// fused SwiGLU) times BM rows of x over the chunks `range` of K, for column block `cb` (features 256 cb ..
// 256 cb + 255), into acc[m][j][i]: matrix m, feature 64 ct + 16 (J h + j) + g + 8 ((i / 2) % 2) of column tile
// ct = 4 cb + warp, row 8 (i / 4) + 2 t + i % 2 of the block's rows. x_row(r) is the offset in x (halves) of the
// block's row r, or -1 where the row is absent (zero-filled). It leaves the x ring as it found it: free.
template <int BITS, int BM, int WG, int STAGES, int PF, int KIF, int MATS, class XRow>
__device__ __forceinline__ void mainloop(XRow x_row, const __half* x, const FragMatrix (&w)[MATS], int cb,
                                         ChunkRange range, int N, int K, int G, unsigned char* smem,
                                         float (&acc)[MATS][4 / WG][BM / 2]) {
  constexpr int J = 4 / WG, THREADS = WG * 128, KS = kBK / 16;
  constexpr int STAGE_BYTES = BM * kStageRowBytes;
  constexpr int TILE_WORDS = frag::BTile<BITS>::WORDS;
  static_assert(WG == 1 || WG == 2 || WG == 4, "warpgroups split a tile's 4 fragment pairs");
  static_assert(qt::wgmma_valid_n(BM) && MATS * J * BM / 2 <= 128, "BM is wgmma's N; accumulators stay within 128");
  static_assert(PF == 0 || (KS % PF == 0 && PF <= frag::kPadTiles), "the ring divides a stage and stays in the padding");
  static_assert((KIF == 1 || KIF == 2) && STAGES > KIF, "x stages ahead of the k-steps in flight: STAGES - KIF >= 1");
  constexpr int AHEAD = STAGES - KIF;  // stages of x in flight ahead of the one the wgmmas read
  using Tile = WTile<BITS, J>;
  // The weights' shared ring (PF = 0): WSLOTS chunks; a lane's words of a tile are WQ copies of WU words, each
  // copy index a run of THREADS consecutive copies so that a warp's reads of one copy are conflict-free.
  constexpr bool WSMEM = PF == 0;
  constexpr int WSLOTS = AHEAD + 2, WU = Tile::WORDS < 4 ? Tile::WORDS : 4, WQ = Tile::WORDS / WU;
  constexpr int WTILES_BYTES = MATS * KS * WQ * THREADS * WU * 4;
  // After a slot's weights (one weight matrix), the scales (and INT4 zeros) of the groups its chunk's k-steps
  // start: entry e of column tile t holds those of k-step e's group, copied for the chunk's first k-step and each
  // that starts a group (the others are never read).
  constexpr int GENTRY_BYTES = (int)group_entry_bytes(BITS), SCALE_PIECES = 64 * 2 / 16;
  constexpr int GPIECES = SCALE_PIECES + (BITS == 4 ? 16 * 4 / 16 : 0);  // 16-byte copies of one entry and tile
  constexpr bool RING_GROUPS_FIT = WSMEM && MATS == 1;  // the slots carry group entries (below)
  constexpr int WSLOT_BYTES = WTILES_BYTES + (RING_GROUPS_FIT ? MATS * KS * kTiles * GENTRY_BYTES : 0);
  static_assert(!WSMEM || (int64_t)WSLOTS * WSLOT_BYTES == weight_ring_bytes(BITS, STAGES, KIF, PF, MATS),
                "the host sizes the weight ring as the kernel lays it out");
  static_assert(!WSMEM || MATS * kTiles * GPIECES <= THREADS, "one copy a thread covers a k-step's group entries");

  const int tid = threadIdx.x, lane = tid & 31, warp = (tid >> 5) & 3, h = tid >> 7;
  const int g8 = lane >> 2;
  const int n_tiles = (N + 63) / 64, ktiles = K / 16, gsteps = G / 16, groups = K / G;
  const int tile = min(cb * kTiles + warp, n_tiles - 1);  // a tile past N computes on the last one
  // K need only be a multiple of 16: the last chunk may be short, its missing columns of x zero-filled and its
  // missing k-steps skipped.
  const int c_begin = range.begin, chunks = range.count;
  const int kt_begin = c_begin * KS, steps = min(ktiles, kt_begin + chunks * KS) - kt_begin;

  const uint32_t pad = (1024 - qt::smem_u32(smem) % 1024) % 1024;  // the 128B swizzle atom is 1024-aligned
  const uint32_t ring_base = qt::smem_u32(smem) + pad;

  // x copies: each thread always moves chunk ch of the same rows r0 + RSTEP j; a stage adds its K offset and
  // slot. RSTEP is a multiple of 8, so every row of a thread has the swizzle of r0 and its slot address is r0's
  // plus whole rows: one address, and each row's offset into x (32 bits: M K < 2^31), held per copy.
  constexpr int COPIES = BM * 8, PER = (COPIES + THREADS - 1) / THREADS, RSTEP = THREADS / 8;
  const int ch = tid & 7, r0 = tid >> 3;
  const uint32_t x_dst = ring_base + r0 * kStageRowBytes + ((ch ^ (r0 & 7)) << 4);
  int x_off[PER];         // the row's first column of this range, chunk ch, in halves from x
  uint32_t x_present = 0;  // bit j: copy j's row exists (else its 16 bytes are zero-filled)
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    const int row = x_row(min(r0 + RSTEP * j, BM - 1));
    x_off[j] = (row >= 0 ? row : 0) + c_begin * kBK + ch * 8;
    x_present |= (row >= 0 ? 1u : 0u) << j;
  }
  const int x_cols = K - c_begin * kBK;  // columns of x from this range's start to K
  auto load_x = [&](int c, int slot) {
    const bool in_k = c * kBK + ch * 8 < x_cols;  // K is a multiple of 8
#pragma unroll
    for (int j = 0; j < PER; ++j)
      if (COPIES % THREADS == 0 || r0 + RSTEP * j < BM)
        qt::cp_async_cg16(x_dst + j * RSTEP * kStageRowBytes + slot * STAGE_BYTES,
                          x + x_off[j] + (in_k ? c * kBK : 0), in_k && (x_present >> j & 1u) ? 16u : 0u);
  };
  // The weight words copy q of this lane takes from its run of a tile (load_wtile's choice of words).
  auto wtile_word = [&](int q) {
    if constexpr (BITS == 4) return J < 4 ? J * h : 0;
    else return Tile::WORDS == 8 ? 128 * q : Tile::WORDS == 4 ? 128 * h : 128 * (h >> 1) + 2 * (h & 1);
  };
  const uint32_t wring_base = ring_base + STAGES * STAGE_BYTES;
  auto wslot_addr = [&](int slot, int m, int kk, int q) {
    return wring_base + slot * WSLOT_BYTES + (((m * KS + kk) * WQ + q) * THREADS + tid) * (WU * 4);
  };
  auto gentry_addr = [&](int slot, int m, int e, int t) {
    return wring_base + slot * WSLOT_BYTES + WTILES_BYTES + ((m * KS + e) * kTiles + t) * GENTRY_BYTES;
  };
  // The shared ring carries the group scales too, so that no global load is left in the loop: loaded a group
  // ahead in registers, a group of 32 (two k-steps, less than a round trip) would wait for its scales. Not in
  // the fused gate/up (MATS = 2): it holds two of everything, its widest points fit the register file with 1-3
  // registers to spare, and the copies' registers made them spill (24-32 bytes, NVRTC 13.0); it loads its scales
  // a group ahead (RING_GROUPS_FIT).
  // The group the chunks being copied have reached, counted from the range's first (the chunks are copied in
  // order): its index and its k-tiles [copy_start, copy_start + gsteps).
  int copy_group = kt_begin / gsteps, copy_start = copy_group * gsteps;
  // Chunk c of this range (unpredicated past K, as the register ring: into the next tile or the padding).
  auto load_w = [&](int c, int slot) {
#pragma unroll
    for (int m = 0; m < MATS; ++m)
#pragma unroll
      for (int kk = 0; kk < KS; ++kk) {
        const uint32_t* src = w[m].q + ((int64_t)tile * ktiles + kt_begin + c * KS + kk) * TILE_WORDS + lane * 4;
#pragma unroll
        for (int q = 0; q < WQ; ++q) {
          // Whole 16 bytes bypass L1 (.cg), as x's copies do: a block reads its weights once. Smaller runs (a
          // lane's share where warpgroups split a tile) can only be .ca.
          if constexpr (WU == 4) qt::cp_async_cg16(wslot_addr(slot, m, kk, q), src + wtile_word(q));
          else qt::cp_async_ca<WU * 4>(wslot_addr(slot, m, kk, q), src + wtile_word(q));
        }
      }
    // The block's threads share the group entries out, a 16-byte piece each; other threads read them, after
    // the barrier of the chunk whose commit group carried them.
    if constexpr (!RING_GROUPS_FIT) return;
    const int piece = tid % GPIECES, t = tid / GPIECES % kTiles, m = tid / (GPIECES * kTiles);
    const bool copier = tid < MATS * kTiles * GPIECES;
    const int64_t gtile = min(cb * kTiles + t, n_tiles - 1);
#pragma unroll
    for (int e = 0; e < KS; ++e) {
      const int kt = kt_begin + c * KS + e;
      if (kt >= ktiles) break;  // the short last chunk (uniform)
      if (kt >= copy_start + gsteps) ++copy_group, copy_start += gsteps;  // gsteps >= 1: one step at most
      if (!copier || (e > 0 && kt != copy_start)) continue;
      const int64_t tg = gtile * groups + copy_group;
      const uint32_t dst = gentry_addr(slot, m, e, t) + piece * 16;
      if (piece < SCALE_PIECES) qt::cp_async_cg16(dst, w[m].s + tg * 64 + piece * 8);
      else if constexpr (BITS == 4) qt::cp_async_cg16(dst, w[m].z + tg * 16 + (piece - SCALE_PIECES) * 4);
    }
  };
  // Commit group g holds x's chunk g and the weights' chunk g + 1 (group 0 chunk 0's too): the wait for x's
  // chunk c leaves chunk c + 1's weights landed, which the last k-step of chunk c dequantizes.
#pragma unroll
  for (int s = 0; s < AHEAD; ++s) {
    if (s < chunks) load_x(s, s);
    if constexpr (WSMEM) {
      if (s == 0 && chunks > 0) load_w(0, 0);
      if (s + 1 < chunks) load_w(s + 1, s + 1);
    }
    qt::cp_async_commit();
  }

  const uint64_t policy = qt::policy_evict_first();
  const uint32_t* wnext[MATS];
  constexpr int RING = PF > 0 ? PF : 1;  // register ring slots (one unused where the ring is shared)
  Tile ring[MATS][RING];
  if constexpr (!WSMEM) {
#pragma unroll
    for (int m = 0; m < MATS; ++m) {
      wnext[m] = w[m].q + ((int64_t)tile * ktiles + kt_begin) * TILE_WORDS + lane * 4;
#pragma unroll
      for (int p = 0; p < PF; ++p) load_wtile<BITS, J>(wnext[m] + p * TILE_WORDS, h, policy, ring[m][p]);
      wnext[m] += PF * TILE_WORDS;
    }
  }
  // A tile's words from this thread's own slots of the shared ring.
  auto read_wtile = [&](int s, int m, Tile& t) {
    const int kk = s % KS, slot = (s / KS) % WSLOTS;
#pragma unroll
    for (int q = 0; q < WQ; ++q) {
      const unsigned char* p = smem + pad + (wslot_addr(slot, m, kk, q) - ring_base);
      if constexpr (WU == 4) {
        const uint4 v = *reinterpret_cast<const uint4*>(p);
        t.w[4 * q] = v.x, t.w[4 * q + 1] = v.y, t.w[4 * q + 2] = v.z, t.w[4 * q + 3] = v.w;
      } else if constexpr (WU == 2) {
        const uint2 v = *reinterpret_cast<const uint2*>(p);
        t.w[0] = v.x, t.w[1] = v.y;
      } else {
        t.w[0] = *reinterpret_cast<const uint32_t*>(p);
      }
    }
  };

  // This warpgroup's fragments, 2 J h .. 2 J h + 2 J - 1, are its local fragments 0 .. 2 J - 1: registers are
  // indexed by the local number only (a register array indexed at run time would live in local memory).
  frag::Zeros4 z[MATS];  // local fragment e: the zero constants of column 8 (2 J h + e) + g
  uint32_t sc[MATS][2 * J];  // local fragment e: the scale of that column in both halves
  // The next group's raw scales and zero words, loaded one group ahead: a group's first k-step would
  // otherwise wait out an L2 round trip every G / 16 steps.
  uint32_t sc_next[MATS][2 * J];
  uint2 zw_next[MATS];
  auto fetch_group = [&](int grp) {
    const int64_t tg = (int64_t)tile * groups + grp;
#pragma unroll
    for (int m = 0; m < MATS; ++m) {
      if constexpr (BITS == 4) zw_next[m] = *reinterpret_cast<const uint2*>(w[m].z + tg * 16 + 2 * g8);
      const unsigned short* s16 = reinterpret_cast<const unsigned short*>(w[m].s + tg * 64);
#pragma unroll
      for (int e = 0; e < 2 * J; ++e) {
        const int f = 2 * J * h + e;
        sc_next[m][e] = s16[32 * (f >> 2) + 8 * (g8 >> 1) + 2 * (f & 3) + (g8 & 1)];
      }
    }
  };
  auto use_fetched_group = [&]() {
#pragma unroll
    for (int m = 0; m < MATS; ++m) {
      if constexpr (BITS == 4) {
        // Fragment f's zero sits at nibbles f % 4 and f % 4 + 4 of word f / 4; for J <= 2 the warpgroup's
        // fragments share one word, shifted so its first lands at nibble 0.
        uint2 zw = zw_next[m];
        if (J < 4) {
          const int f0 = 2 * J * h;
          zw.x = ((f0 >> 2) ? zw.y : zw.x) >> (4 * (f0 & 3));
        }
        frag::zeros_from_words(zw, z[m]);
      }
#pragma unroll
      for (int e = 0; e < 2 * J; ++e) sc[m][e] = sc_next[m][e] | (sc_next[m][e] << 16);
    }
  };
  // The shared ring's entry of step s (its chunk's slot, its k-step's entry, this warp's column tile) into the
  // registers a fetch a group ahead fills, so that the two paths share them.
  auto read_ring_group = [&](int s) {
#pragma unroll
    for (int m = 0; m < MATS; ++m) {
      const unsigned char* entry = smem + pad + (gentry_addr((s / KS) % WSLOTS, m, s % KS, warp) - ring_base);
      if constexpr (BITS == 4) zw_next[m] = *reinterpret_cast<const uint2*>(entry + 128 + 8 * g8);
      const unsigned short* s16 = reinterpret_cast<const unsigned short*>(entry);
#pragma unroll
      for (int e = 0; e < 2 * J; ++e) {
        const int f = 2 * J * h + e;
        sc_next[m][e] = s16[32 * (f >> 2) + 8 * (g8 >> 1) + 2 * (f & 3) + (g8 & 1)];
      }
    }
  };

  // Step s (of this split's range): ring slot `slot` of each matrix to the A registers of its J pairs, then the
  // slot refilled PF tiles ahead. Where step s starts a group, its scales and zeros (fetched a group ahead, or
  // in the shared ring's slot) take effect. The next group's first k-tile is counted, not divided out: a
  // division by the run-time group size is some 20 integer instructions a k-step in a loop that issues about 200.
  int next_group = 0, group_start = 0;  // the next group to take effect, and the k-tile that starts it
  // A group of a multiple of 32 columns (the host's constraint) starts at an even step only (a range starts at a
  // chunk, 4 k-steps): `starts` is false where the unrolled k-step is odd, so that the group's code is there in
  // two of the four copies, not four (each copy some 120 instructions a k-step that are skipped but still issued
  // through the loop's cache and counted by the static model).
  auto dequant = [&](int s, int slot, uint32_t (&a)[MATS][J][4], bool starts) {
    const int kt = kt_begin + s;
    if (s == 0) {
      next_group = kt / gsteps;
      group_start = kt;
      if constexpr (!RING_GROUPS_FIT) fetch_group(next_group);
    }
    if (starts && kt == group_start) {
      if constexpr (RING_GROUPS_FIT) read_ring_group(s);  // copied with the chunk's weights: nothing to wait for
      use_fetched_group();
      ++next_group;
      group_start = next_group * gsteps;
      if constexpr (!RING_GROUPS_FIT)
        if (next_group < groups) fetch_group(next_group);
    }
#pragma unroll
    for (int m = 0; m < MATS; ++m) {
      Tile shared_tile;
      if constexpr (WSMEM) read_wtile(s, m, shared_tile);
      Tile& cur = WSMEM ? shared_tile : ring[m][slot];
#pragma unroll
      for (int j = 0; j < J; ++j) {
        uint32_t b[8][2];  // local fragments 2 j, 2 j + 1: A rows g and g + 8 of pair j
        if constexpr (BITS == 4) {
          frag::unpack4(cur.w[j], z[m], j, b);
        } else {
          frag::unpack8(cur.w[2 * j], b[2 * j]);
          frag::unpack8(cur.w[2 * j + 1], b[2 * j + 1]);
        }
        a[m][j][0] = qt::mul_f16x2(b[2 * j][0], sc[m][2 * j]);
        a[m][j][1] = qt::mul_f16x2(b[2 * j + 1][0], sc[m][2 * j + 1]);
        a[m][j][2] = qt::mul_f16x2(b[2 * j][1], sc[m][2 * j]);
        a[m][j][3] = qt::mul_f16x2(b[2 * j + 1][1], sc[m][2 * j + 1]);
      }
      if constexpr (!WSMEM) {
        load_wtile<BITS, J>(wnext[m], h, policy, cur);
        wnext[m] += TILE_WORDS;
      }
    }
  };

#pragma unroll
  for (int m = 0; m < MATS; ++m)
#pragma unroll
    for (int j = 0; j < J; ++j)
#pragma unroll
      for (int i = 0; i < BM / 2; ++i) acc[m][j][i] = 0.0f;
  uint32_t a[2][MATS][J][4];  // step s uses a[s & 1]: a stage has an even number of steps
  if constexpr (WSMEM) {
    qt::cp_async_wait<AHEAD - 1>();  // group 0: chunk 0's weights, this thread's own copies,
    __syncthreads();                 // and its group entries, which other threads copied
  }
  if (steps > 0) dequant(0, 0, a[0], true);

  for (int c = 0; c < chunks; ++c) {
    qt::cp_async_wait<AHEAD - 1>();
    qt::fence_proxy_async_shared();  // this thread's cp.async data, visible to the tensor core's reads
    // Every thread's copies of chunk c landed, and every thread retired the wgmmas that read chunk c - KIF's
    // slot (at KIF = 2 only the last k-step of chunk c - 1 may still be in flight): that slot takes chunk
    // c + AHEAD.
    __syncthreads();
    if (c + AHEAD < chunks) load_x(c + AHEAD, (c + AHEAD) % STAGES);
    // Chunk c + AHEAD + 1's weights take the slot of chunk c - 1, whose last k-step this thread dequantized
    // during chunk c - 1.
    if constexpr (WSMEM)
      if (c + AHEAD + 1 < chunks) load_w(c + AHEAD + 1, (c + AHEAD + 1) % WSLOTS);
    qt::cp_async_commit();
    const uint32_t stage = ring_base + (c % STAGES) * STAGE_BYTES;
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      const int s = c * KS + kk;
      if (s >= steps) break;  // the short last chunk of a K that is no multiple of 64 (uniform)
      uint32_t(&cur)[MATS][J][4] = a[kk & 1];
#pragma unroll
      for (int m = 0; m < MATS; ++m)
#pragma unroll
        for (int j = 0; j < J; ++j) qt::wgmma_fence_operand<BM / 2>(acc[m][j]);
      qt::wgmma_fence_operand<4 * J * MATS>(&cur[0][0][0]);
      qt::wgmma_fence();
      // k-step kk of the stage: 32 bytes into each 128-byte swizzled row; 8 rows of x per 1024 bytes.
      const uint64_t desc = qt::wgmma_desc(stage + 32 * kk, 16, 8 * kStageRowBytes, qt::kSwizzle128B);
#pragma unroll
      for (int m = 0; m < MATS; ++m)
#pragma unroll
        for (int j = 0; j < J; ++j) qt::wgmma_m64k16_f16_rs<BM, 0>(acc[m][j], cur[m][j], desc, 1);
      qt::wgmma_commit_group();
      if constexpr (KIF == 1) {
        if (s + 1 < steps) dequant(s + 1, (kk + 1) % RING, a[(kk + 1) & 1], (kk & 1) == 1);
        qt::wgmma_wait_group<0>();
      } else {
        qt::wgmma_wait_group<1>();  // step s - 1 retired: its A set is the one step s + 1 takes
        if (s + 1 < steps) dequant(s + 1, (kk + 1) % RING, a[(kk + 1) & 1], (kk & 1) == 1);
      }
#pragma unroll
      for (int m = 0; m < MATS; ++m)
#pragma unroll
        for (int j = 0; j < J; ++j) qt::wgmma_fence_operand<BM / 2>(acc[m][j]);
    }
  }
  if constexpr (KIF > 1) {
    qt::wgmma_wait_group<0>();  // the last k-step's accumulators, before the caller reads them
#pragma unroll
    for (int m = 0; m < MATS; ++m)
#pragma unroll
      for (int j = 0; j < J; ++j) qt::wgmma_fence_operand<BM / 2>(acc[m][j]);
  }
  qt::cp_async_wait<0>();
  __syncthreads();  // every warpgroup's wgmmas have read their last stage: the ring may be refilled
}

// acc[.][j][i]'s feature (relative to the block's first) and row (relative to its first row).
template <int WG>
__device__ __forceinline__ int acc_feature(int j, int i) {
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, h = threadIdx.x >> 7;
  return warp * 64 + 16 * ((4 / WG) * h + j) + (lane >> 2) + 8 * ((i >> 1) & 1);
}
__device__ __forceinline__ int acc_row(int i) { return 8 * (i >> 2) + 2 * (threadIdx.x & 3) + (i & 1); }

// The cluster split's reduction: this block's acc (MATS matrices) into its partial tiles, then rows
// [BM r / CS, BM (r + 1) / CS) of the output tile (r: this block's rank) summed over the CS blocks' tiles, in
// rank order, and handed to store(row, feature, sums): the block's row, its first of 4 features, and
// sums[m][e], matrix m's sum of feature + e.
template <int BM, int WG, int CS, int MATS, class Store>
__device__ __forceinline__ void cluster_reduce(const float (&acc)[MATS][4 / WG][BM / 2], unsigned char* smem,
                                               Store store) {
  constexpr int J = 4 / WG, THREADS = WG * 128, ROWS = BM / CS, UNITS = ROWS * kTiles * 16;
  constexpr uint32_t kMatBytes = BM * kPartRowFloats * 4;
  static_assert(BM % CS == 0, "each block of the cluster sums whole rows");
  float* part = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int m = 0; m < MATS; ++m)
#pragma unroll
    for (int j = 0; j < J; ++j)
#pragma unroll
      for (int i = 0; i < BM / 2; ++i)
        part[(m * BM + acc_row(i)) * kPartRowFloats + acc_feature<WG>(j, i)] = acc[m][j][i];
  qt::cluster_sync();  // every block's partial tiles written, and visible to the others
  const uint32_t rank = qt::cluster_ctarank(), base = qt::smem_u32(part);
  uint32_t remote[CS];
#pragma unroll
  for (int q = 0; q < CS; ++q) remote[q] = qt::map_shared_rank(base, q);
  for (int u = threadIdx.x; u < UNITS; u += THREADS) {
    const int r = (int)rank * ROWS + u / (kTiles * 16), c = 4 * (u % (kTiles * 16));
    const uint32_t off = (uint32_t)(r * kPartRowFloats + c) * 4;
    float sums[MATS][4];
#pragma unroll
    for (int m = 0; m < MATS; ++m) {
      float4 sum = qt::ld_shared_cluster_f32x4(remote[0] + m * kMatBytes + off);
#pragma unroll
      for (int q = 1; q < CS; ++q) {
        const float4 v = qt::ld_shared_cluster_f32x4(remote[q] + m * kMatBytes + off);
        sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
      }
      sums[m][0] = sum.x, sums[m][1] = sum.y, sums[m][2] = sum.z, sums[m][3] = sum.w;
    }
    store(r, c, sums);
  }
  qt::cluster_sync();  // no block leaves, taking its shared memory with it, while another still reads it
}

}  // namespace frag_wgmma

template <int BITS, int BM, int WG, int STAGES, int PF, int KIF, int CS>
__global__ void __launch_bounds__(WG * 128, 1)
    frag_wgmma_gemm_kernel(const __half* x, const uint32_t* bq, const __half* bs, const uint32_t* bz, __half* y,
                           float* ws, unsigned* locks, int M, int N, int K, int G) {
  qt::grid_dependency_entry();
  using namespace frag_wgmma;
  constexpr int J = 4 / WG, THREADS = WG * 128;
  QT_DYNAMIC_SHARED(smem, unsigned char);
  const int m0 = blockIdx.y * BM;
  const FragMatrix w[1] = {{bq, bs, bz}};
  float acc[1][J][BM / 2];
  mainloop<BITS, BM, WG, STAGES, PF, KIF, 1>([&](int r) { return m0 + r < M ? (m0 + r) * K : -1; }, x, w, blockIdx.x,
                                        grid_split(K), N, K, G, smem, acc);

  const int n0 = blockIdx.x * kTiles * 64;
  if constexpr (CS > 1) {
    cluster_reduce<BM, WG, CS, 1>(acc, smem, [&](int r, int c, const float (&sums)[1][4]) {
      const int row = m0 + r;
      if (row >= M) return;
      for (int e = 0; e < 4 && n0 + c + e < N; ++e) y[(int64_t)row * N + n0 + c + e] = __float2half_rn(sums[0][e]);
    });
    return;
  }
#pragma unroll
  for (int j = 0; j < J; ++j)
#pragma unroll
    for (int i = 0; i < BM / 2; ++i) {
      const int col = n0 + acc_feature<WG>(j, i), row = m0 + acc_row(i);
      if (row >= M || col >= N) continue;  // also a tile past N, which computed on the last one
      if (gridDim.z == 1) y[(int64_t)row * N + col] = __float2half_rn(acc[0][j][i]);
      else ws[((int64_t)blockIdx.z * M + row) * N + col] = acc[0][j][i];
    }
  if (gridDim.z == 1) return;

  // In-launch reduction: the last block of this output tile to finish sums every split's partials.
  if (!last_block_to_arrive(&locks[blockIdx.y * gridDim.x + blockIdx.x], gridDim.z)) return;
  sum_split_partials<THREADS>(ws, y, m0, n0, min(BM, M - m0), min(kTiles * 64, N - n0), M, N);
}

// Stream-K (Osama et al., PPoPP 2023): the grid's gridDim.x blocks share the product's units, the (output tile,
// 64-column chunk of K) pairs in tile-major order, in equal contiguous ranges. Every block has the same work
// whatever the tile count, so there is no partial last wave: what the grid split cannot give where tiles and SMs
// do not divide. A range covers whole tiles, which the block stores, and at its ends a part of a tile, whose
// fp32 partials go to the block's two slots of ws ([gridDim.x][2][BM][256]; slot 0 for the tile its range
// begins in, 1 for the one it ends in); the last block of a shared tile to arrive (counted in locks[tile], reset
// for the next launch) sums them. Tiles are BM rows by a column block of 256 features, column blocks fastest.
// gridDim.x must not exceed the units (the plan clamps it), so that no range is empty.
template <int BITS, int BM, int WG, int STAGES, int PF, int KIF>
__global__ void __launch_bounds__(WG * 128, 1)
    frag_wgmma_streamk_kernel(const __half* x, const uint32_t* bq, const __half* bs, const uint32_t* bz, __half* y,
                              float* ws, unsigned* locks, int M, int N, int K, int G) {
  qt::grid_dependency_entry();
  using namespace frag_wgmma;
  constexpr int J = 4 / WG, THREADS = WG * 128, COLS = kTiles * 64, SLOT = BM * COLS;
  QT_DYNAMIC_SHARED(smem, unsigned char);
  const int tid = threadIdx.x;
  const int col_blocks = ((N + 63) / 64 + kTiles - 1) / kTiles, chunks = k_chunks(K);
  const int64_t units = (int64_t)col_blocks * ((M + BM - 1) / BM) * chunks, blocks = gridDim.x;
  auto start = [&](int64_t b) { return b * units / blocks; };  // block b's first unit
  auto owner = [&](int64_t u) {  // the block whose range holds unit u
    int64_t b = u * blocks / units;
    while (start(b + 1) <= u) ++b;
    while (start(b) > u) --b;
    return b;
  };
  // The slot of block b's partials of tile t: 0 where b's range begins inside t, else 1 (where it ends).
  auto slot_of = [&](int64_t b, int t) { return start(b) >= (int64_t)t * chunks ? 0 : 1; };
  const FragMatrix w[1] = {{bq, bs, bz}};
  const int64_t end = start(blockIdx.x + 1);
  for (int64_t u = start(blockIdx.x); u < end;) {
    const int t = (int)(u / chunks), c0 = (int)(u % chunks);
    const int c1 = end - u < chunks - c0 ? c0 + (int)(end - u) : chunks;  // this range's chunks of tile t
    const int cb = t % col_blocks, m0 = (t / col_blocks) * BM, n0 = cb * COLS;
    float acc[1][J][BM / 2];
    mainloop<BITS, BM, WG, STAGES, PF, KIF, 1>([&](int r) { return m0 + r < M ? (m0 + r) * K : -1; }, x, w, cb,
                                          ChunkRange{c0, c1 - c0}, N, K, G, smem, acc);
    u += c1 - c0;
    if (c0 == 0 && c1 == chunks) {  // the whole tile: this block's alone
#pragma unroll
      for (int j = 0; j < J; ++j)
#pragma unroll
        for (int i = 0; i < BM / 2; ++i) {
          const int col = n0 + acc_feature<WG>(j, i), row = m0 + acc_row(i);
          if (row < M && col < N) y[(int64_t)row * N + col] = __float2half_rn(acc[0][j][i]);
        }
      continue;
    }
    float* part = ws + ((int64_t)blockIdx.x * 2 + slot_of(blockIdx.x, t)) * SLOT;
#pragma unroll
    for (int j = 0; j < J; ++j)
#pragma unroll
      for (int i = 0; i < BM / 2; ++i) part[acc_row(i) * COLS + acc_feature<WG>(j, i)] = acc[0][j][i];
    const int64_t first = owner((int64_t)t * chunks), last = owner((int64_t)t * chunks + chunks - 1);
    if (!last_block_to_arrive(&locks[t], (unsigned)(last - first + 1))) continue;
    const int rows = min(BM, M - m0), cols = min(COLS, N - n0);
    for (int i = tid; i < rows * cols; i += THREADS) {
      const int r = i / cols, c = i % cols;
      float sum = 0.0f;
      for (int64_t b = first; b <= last; ++b) sum += ws[(b * 2 + slot_of(b, t)) * SLOT + r * COLS + c];
      y[(int64_t)(m0 + r) * N + n0 + c] = __float2half_rn(sum);
    }
  }
}
