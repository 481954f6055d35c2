#pragma once
// y[M][N] = x[M][K] * W on weights in the frag layout (frag_layout.h), INT4 (BITS = 4, AWQ zeros) or INT8
// (BITS = 8, +128 bias), fp16 activations and output, fp32 accumulation on mma.m16n8k16.
//
// Block: WARPS warps; warp w owns TN adjacent 64-column tiles from (blockIdx.x * WARPS + w) * TN, which share
// each A fragment it reads (TN = 2 halves the per-weight cost of ldmatrix, the A copies and the loop), the
// block BM = 16 MF rows of M (blockIdx.y) and a contiguous range of whole groups along K (blockIdx.z of
// gridDim.z splits).
//   A: the block's rows, BK (32 or 64) columns of K per stage, arrive by cp.async in a ring of STAGES stages,
//      16-byte chunks XOR-swizzled so both the copies and the ldmatrix.x4 reads of 8 rows hit 8 different
//      16-byte bank groups.
//   B: each lane loads its fragments of one 16 x 64 tile straight from global memory (one 16-byte load for
//      INT4, two for INT8; each load instruction of the warp reads 512 contiguous bytes) with an evict-first
//      hint, PF tiles ahead of use in a register ring, and dequantizes in registers (LOP3 / PRMT magic
//      numbers) into fp16 (q - z), exact. No shared memory and no ldmatrix for B. The loads are not
//      predicated: the last PF of a block's range read past it, at worst into the layout's padding tiles.
//   Scales: FOLD = 1 (decode): the mma accumulates (q - z) x per group into fp32 partials, multiplied by the
//      group's fp32 scale once per group and column (scales fold out of the inner loop; the weight is never
//      rounded). FOLD = 0 (prefill, MF >= 2): each fp16 weight (q - z) * s is rounded once, as the AWQ
//      reference rounds it, and accumulated directly (no partials, half the accumulator registers).
//   Scales and zeros are loaded once per group. ZPF = 1 (FOLD only) loads the next group's a group ahead, into
//      registers: cp.async's memory clobber keeps the compiler from issuing them early itself, so at ZPF = 0
//      every group starts by waiting on them.
// Split along K (gridDim.z > 1): each block writes fp32 partials to ws[z][M][N], then the last block of an
// output tile to arrive (counted with an atomic in locks[], which it resets to 0) sums the partials in split
// order and writes y: the reduction is in the same launch. RU outputs a thread sums at once (RU = 1: one after
// another, the kernel the H200 runs measured, where 16 rows of a 128-column tile, 32 outputs a thread, took
// 16 us more than one row).
#include "kernels_src/common/qt_cuda.h"
#include "kernels_src/common/splitk.cuh"

namespace frag {

constexpr uint32_t kMagic1024 = 0x64006400u;  // fp16 1024 in both halves
constexpr int kPadTiles = 4;  // zero tiles after the last weight tile (kPadTiles in frag_layout.h)

// Per-group constants of the INT4 zero point of the 8 fragments this lane dequantizes (column 8 f + g):
// lo[f] = 1024 + z (both halves), hi[f] = -(64 + z) (both halves), so the magic-number unpack of a nibble
// gives q - z exactly in one sub or fma. The zero words store each zero at the nibbles these constants need
// (frag_layout.h), so each constant is one LOP3 after at most one shift.
struct Zeros4 {
  uint32_t lo[8], hi[8];
};
__device__ __forceinline__ void zeros_from_words(uint2 zw, Zeros4& z) {
  constexpr int kAndOr = (0xf0 & 0xcc) | 0xaa;
  constexpr uint32_t kNeg64 = 0xd400d400u, kLo = 0x000f000fu, kHi = 0x00f000f0u;
  const uint32_t w[2] = {zw.x, zw.y};
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // zero i of word h at nibbles i, i + 4: lo wants it at 0, 4; hi at 1, 5
    const uint32_t x = w[h], up4 = x << 4, down4 = x >> 4, down8 = x >> 8, down12 = x >> 12;
    const int f = 4 * h;
    z.lo[f] = qt::lop3<kAndOr>(x, kLo, kMagic1024), z.hi[f] = qt::lop3<kAndOr>(up4, kHi, kNeg64);
    z.lo[f + 1] = qt::lop3<kAndOr>(down4, kLo, kMagic1024), z.hi[f + 1] = qt::lop3<kAndOr>(x, kHi, kNeg64);
    z.lo[f + 2] = qt::lop3<kAndOr>(down8, kLo, kMagic1024), z.hi[f + 2] = qt::lop3<kAndOr>(down4, kHi, kNeg64);
    z.lo[f + 3] = qt::lop3<kAndOr>(down12, kLo, kMagic1024), z.hi[f + 3] = qt::lop3<kAndOr>(down8, kHi, kNeg64);
  }
}

// One INT4 word (fragments 2w, 2w+1) -> their B registers (q - z) in fp16.
__device__ __forceinline__ void unpack4(uint32_t q, const Zeros4& z, int w, uint32_t (&b)[8][2]) {
  constexpr int kAndOr = (0xf0 & 0xcc) | 0xaa;
  constexpr uint32_t kSixteenth = 0x2c002c00u;
  const uint32_t top = q >> 8;
  b[2 * w][0] = qt::sub_f16x2(qt::lop3<kAndOr>(q, 0x000f000fu, kMagic1024), z.lo[2 * w]);
  b[2 * w][1] = qt::fma_f16x2(qt::lop3<kAndOr>(q, 0x00f000f0u, kMagic1024), kSixteenth, z.hi[2 * w]);
  b[2 * w + 1][0] = qt::sub_f16x2(qt::lop3<kAndOr>(top, 0x000f000fu, kMagic1024), z.lo[2 * w + 1]);
  b[2 * w + 1][1] = qt::fma_f16x2(qt::lop3<kAndOr>(top, 0x00f000f0u, kMagic1024), kSixteenth, z.hi[2 * w + 1]);
}

// One INT8 word (fragment f: rows 2t, 2t+1, 2t+8, 2t+9 as biased bytes) -> its B registers (u - 128) in fp16:
// a byte under 0x64 is the fp16 1024 + u, minus 1152.
__device__ __forceinline__ void unpack8(uint32_t q, uint32_t (&b)[2]) {
  constexpr uint32_t kBias = 0x64806480u;  // fp16 1152
  b[0] = qt::sub_f16x2(qt::prmt(q, 0x64646464u, 0x5140u), kBias);
  b[1] = qt::sub_f16x2(qt::prmt(q, 0x64646464u, 0x5342u), kBias);
}

template <int BITS>
struct BTile {
  static constexpr int LOADS = BITS == 4 ? 1 : 2;  // 16-byte loads per lane and 16 x 64 tile
  static constexpr int WORDS = 128 * LOADS;        // words per tile
  uint4 v[LOADS];
};

// `tile` already points at this lane's first word.
template <int BITS>
__device__ __forceinline__ void load_tile(const uint32_t* tile, uint64_t policy, BTile<BITS>& t) {
#pragma unroll
  for (int i = 0; i < BTile<BITS>::LOADS; ++i) t.v[i] = qt::ldg_stream_u4(tile + i * 128, policy);
}


}  // namespace frag

template <int BITS, int MF, int WARPS, int STAGES, int PF, int FOLD, int BK, int TN, int ZPF, int RU>
__global__ void __launch_bounds__(WARPS * 32, 1)
    frag_linear_kernel(const __half* x, const uint32_t* bq, const __half* bs, const uint32_t* bz, __half* y,
                       float* ws, unsigned* locks, int M, int N, int K, int G) {
  qt::grid_dependency_entry();
  constexpr int BM = 16 * MF, THREADS = WARPS * 32;
  constexpr int KS = BK / 16;            // k-steps per A stage
  constexpr int ROW = BK * 2;            // bytes per A row in a stage
  constexpr int CHUNKS = BK / 8;         // 16-byte chunks per A row
  constexpr int STAGE_BYTES = BM * ROW;
  static_assert(BK == 32 || BK == 64, "A stages of 32 or 64 columns of K");
  static_assert(KS % PF == 0, "the B ring depth divides the k-steps of an A stage");
  static_assert(PF <= frag::kPadTiles, "the B ring reads at most the layout's padding past the last tile");
  static_assert(!ZPF || FOLD, "the scales and zeros loaded ahead are the folded (decode) form");
  using Tile = frag::BTile<BITS>;
  QT_DYNAMIC_SHARED(smem, unsigned char);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g8 = lane >> 2, t4 = lane & 3;
  const int n_tiles = (N + 63) / 64, ktiles = K / 16, groups = K / G;
  const int nt = (blockIdx.x * WARPS + warp) * TN;  // the warp's first column tile
  const bool active = nt < n_tiles;  // warp-uniform: the warp's mma and ldmatrix stay aligned
  // Tile j of the warp (TN > 1), or its first again where it lies past N (its columns are then not stored).
  auto tile_of = [&](int j) { return active ? min(nt + j, n_tiles - 1) : 0; };
  const int m0 = blockIdx.y * BM;
  const int per_split = (groups + (int)gridDim.z - 1) / (int)gridDim.z;
  const int g_begin = min(groups, (int)blockIdx.z * per_split);
  const int g_end = min(groups, g_begin + per_split);
  const int chunks_per_group = G / BK;
  const int chunks = (g_end - g_begin) * chunks_per_group;
  const int steps = chunks * KS;
  const int k_begin = g_begin * G;

  // Chunk ch of A row r sits at chunk ch ^ swz(r): any 8 consecutive rows, read at one chunk by an ldmatrix
  // phase, land in 8 different 16-byte bank groups (128-byte rows: r & 7; 64-byte rows, two per 128 bytes:
  // the row pair's index).
  auto swz = [](int r) { return BK == 64 ? (r & 7) : ((r >> 1) & 3); };
  // A copies: each thread always moves the same A_PER (row, chunk) pairs, so their source pointers, zero-fill
  // sizes and shared offsets are set up once; a stage only adds its K offset and its slot.
  constexpr int A_COPIES = BM * CHUNKS;
  constexpr int A_PER = (A_COPIES + THREADS - 1) / THREADS;
  const __half* a_src[A_PER];
  uint32_t a_dst[A_PER], a_bytes[A_PER];
#pragma unroll
  for (int j = 0; j < A_PER; ++j) {
    const int i = min(tid + j * THREADS, A_COPIES - 1);  // surplus threads repeat the last copy's addresses
    const int r = i / CHUNKS, ch = i % CHUNKS, row = m0 + r;
    a_src[j] = x + (int64_t)min(row, M - 1) * K + k_begin + ch * 8;  // valid even when zero-filled
    a_dst[j] = qt::smem_u32(smem + r * ROW + ((ch ^ swz(r)) << 4));
    a_bytes[j] = row < M ? 16u : 0u;
  }
  auto load_a = [&](int c, uint32_t slot) {
#pragma unroll
    for (int j = 0; j < A_PER; ++j)
      if (A_COPIES % THREADS == 0 || tid + j * THREADS < A_COPIES)
        qt::cp_async_cg16(a_dst[j] + slot, a_src[j] + c * BK, a_bytes[j]);
  };
  const uint32_t* btile = bq + ((int64_t)tile_of(0) * ktiles + g_begin * (G / 16)) * Tile::WORDS + lane * 4;
  const int bstride = (tile_of(TN - 1) - tile_of(0)) / max(TN - 1, 1) * ktiles * Tile::WORDS;  // words to tile j + 1

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < chunks) load_a(s, s * STAGE_BYTES);
    qt::cp_async_commit();
  }
  const uint64_t policy = qt::policy_evict_first();
  Tile ring[TN][PF];
#pragma unroll
  for (int j = 0; j < TN; ++j)
#pragma unroll
    for (int p = 0; p < PF; ++p)
      if (active && p < steps) frag::load_tile<BITS>(btile + j * bstride + p * Tile::WORDS, policy, ring[j][p]);
  btile += PF * Tile::WORDS;  // the next tile to load

  float acc[MF][8 * TN][4];
#pragma unroll
  for (int mf = 0; mf < MF; ++mf)
#pragma unroll
    for (int f = 0; f < 8 * TN; ++f)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mf][f][e] = 0.0f;
  float part[MF][8 * TN][4];  // FOLD: this group's sum of x (q - z)
  const float zero4[4] = {0.0f, 0.0f, 0.0f, 0.0f};

  // This lane's ldmatrix offset in the slot being read, per fragment row, at k-step 0. The chunk of k-step
  // kk is 2 kk + (lane >> 4); under the swizzle that is an XOR of kk << 5 on the offset, whose bits 5 and 6
  // come from the chunk alone (rows and slots are multiples of 64 bytes, and of 128 where a chunk reaches bit
  // 6). Carried from stage to stage, so the lane's row and swizzle are not recomputed.
  uint32_t a_rd[MF];
#pragma unroll
  for (int mf = 0; mf < MF; ++mf) {
    const int r = mf * 16 + (lane & 15);
    a_rd[mf] = r * ROW + (((lane >> 4) ^ swz(r)) << 4);
  }
  const uint32_t smem_base = qt::smem_u32(smem);

  int chunk = 0;
  uint32_t read_slot = 0, write_slot = (STAGES - 1) * STAGE_BYTES;  // byte offsets of ring slots
  frag::Zeros4 z[TN];
  uint32_t sc[TN][8];

  // One A stage: wait for it, refill the slot retired last, then KS k-steps of ldmatrix + dequant + mma.
  // first (FOLD only): the group's first stage, whose first mma starts the partials from zero.
  // `first` is a literal at both call sites, so after inlining each copy keeps only its own mma form.
  auto stage = [&](bool first) {
    qt::cp_async_wait<STAGES - 2>();
    __syncthreads();  // stage `chunk` landed for every thread; the slot refilled below is retired
    if (chunk + STAGES - 1 < chunks) load_a(chunk + STAGES - 1, write_slot);
    qt::cp_async_commit();
    if (active) {
#pragma unroll
      for (int kk = 0; kk < KS; ++kk) {
        uint32_t a[MF][4];
#pragma unroll
        for (int mf = 0; mf < MF; ++mf) qt::ldmatrix_x4(a[mf], smem_base + (a_rd[mf] ^ (kk << 5)));
#pragma unroll
        for (int j = 0; j < TN; ++j) {  // every tile of the warp shares the A fragments
          // Dequantize the ring slot, then refill it PF tiles ahead (no register copy of the slot).
          uint32_t b[8][2];
          Tile& cur = ring[j][kk % PF];
          if constexpr (BITS == 4) {
#pragma unroll
            for (int i = 0; i < 4; ++i) frag::unpack4((&cur.v[0].x)[i], z[j], i, b);
          } else {
#pragma unroll
            for (int f = 0; f < 8; ++f) frag::unpack8((&cur.v[f >> 2].x)[f & 3], b[f]);
          }
          // Unpredicated: the block's last PF loads read tiles past its K range (the next range's, or the
          // layout's padding tiles after the last), never used. A predicate here would cost a compare per
          // stage and a register copy of the ring slot it must keep.
          frag::load_tile<BITS>(btile + j * bstride + kk * Tile::WORDS, policy, cur);
          if constexpr (!FOLD) {
#pragma unroll
            for (int f = 0; f < 8; ++f)
              b[f][0] = qt::mul_f16x2(b[f][0], sc[j][f]), b[f][1] = qt::mul_f16x2(b[f][1], sc[j][f]);
          }
#pragma unroll
          for (int mf = 0; mf < MF; ++mf)
#pragma unroll
            for (int f = 0; f < 8; ++f) {
              float(&c)[4] = FOLD ? part[mf][8 * j + f] : acc[mf][8 * j + f];
              if (FOLD && first && kk == 0) qt::mma_m16n8k16_f16(c, a[mf], b[f], zero4);
              else qt::mma_m16n8k16_f16(c, a[mf], b[f], c);
            }
        }
      }
    }
    btile += KS * Tile::WORDS;
    ++chunk;
#pragma unroll
    for (int mf = 0; mf < MF; ++mf)
      a_rd[mf] = read_slot == (STAGES - 1) * STAGE_BYTES ? a_rd[mf] - read_slot : a_rd[mf] + STAGE_BYTES;
    read_slot = read_slot == (STAGES - 1) * STAGE_BYTES ? 0 : read_slot + STAGE_BYTES;
    write_slot = write_slot == (STAGES - 1) * STAGE_BYTES ? 0 : write_slot + STAGE_BYTES;
  };

  // ZPF: the next group's words, loaded a group ahead: this lane's zero word pair (INT4) and the scales of its C
  // columns (8f + 2t, +1) as two 8-half runs.
  struct GroupWords {
    uint2 zw;
    uint4 s[2];
  };
  GroupWords ahead[TN];
  auto load_ahead = [&](int grp) {
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int64_t tg = (int64_t)tile_of(j) * groups + grp;
      if constexpr (BITS == 4) ahead[j].zw = active ? *reinterpret_cast<const uint2*>(bz + tg * 16 + 2 * g8) : uint2{0, 0};
      if (active) {
#pragma unroll
        for (int r = 0; r < 2; ++r) ahead[j].s[r] = *reinterpret_cast<const uint4*>(bs + tg * 64 + 32 * r + 8 * t4);
      }
    }
  };
  if (ZPF && g_begin < g_end) load_ahead(g_begin);

  for (int grp = g_begin; grp < g_end; ++grp) {
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      if constexpr (ZPF) {
        if constexpr (BITS == 4) frag::zeros_from_words(ahead[j].zw, z[j]);
        if (active) {
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const uint4 v = ahead[j].s[r];
            sc[j][4 * r] = v.x, sc[j][4 * r + 1] = v.y, sc[j][4 * r + 2] = v.z, sc[j][4 * r + 3] = v.w;
          }
        }
        continue;
      }
      const int64_t tg = (int64_t)tile_of(j) * groups + grp;
      if constexpr (BITS == 4)
        frag::zeros_from_words(active ? *reinterpret_cast<const uint2*>(bz + tg * 16 + 2 * g8) : uint2{0, 0}, z[j]);
      // FOLD: the scales of this lane's C columns (8f + 2t, +1), as two 8-half runs. Else: the scale of its B
      // column 8f + g in both halves.
      if constexpr (FOLD) {
        if (active) {
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const uint4 v = *reinterpret_cast<const uint4*>(bs + tg * 64 + 32 * r + 8 * t4);
            sc[j][4 * r] = v.x, sc[j][4 * r + 1] = v.y, sc[j][4 * r + 2] = v.z, sc[j][4 * r + 3] = v.w;
          }
        }
      } else if (active) {
        const unsigned short* s16 = reinterpret_cast<const unsigned short*>(bs + tg * 64);
#pragma unroll
        for (int f = 0; f < 8; ++f) {
          const uint32_t s = s16[32 * (f >> 2) + 8 * (g8 >> 1) + 2 * (f & 3) + (g8 & 1)];
          sc[j][f] = s | (s << 16);
        }
      }
    }
    // The next group's words now: their loads overlap this group's stages.
    if (ZPF && grp + 1 < g_end) load_ahead(grp + 1);
    stage(true);
    for (int c = 1; c < chunks_per_group; ++c) stage(false);
    if (FOLD && active) {  // partials times the group's scale, once per group
#pragma unroll
      for (int f = 0; f < 8 * TN; ++f) {
        const uint32_t s2 = sc[f / 8][4 * ((f & 7) >> 2) + (f & 3)];
        const float s0 = __half2float(__ushort_as_half((unsigned short)(s2 & 0xffffu)));
        const float s1 = __half2float(__ushort_as_half((unsigned short)(s2 >> 16)));
#pragma unroll
        for (int mf = 0; mf < MF; ++mf) {
          acc[mf][f][0] += s0 * part[mf][f][0];
          acc[mf][f][1] += s1 * part[mf][f][1];
          acc[mf][f][2] += s0 * part[mf][f][2];
          acc[mf][f][3] += s1 * part[mf][f][3];
        }
      }
    }
  }
  qt::cp_async_wait<0>();

  const int n0 = blockIdx.x * WARPS * TN * 64;
  store_mma_tile<MF, 8 * TN, 64 * TN>(acc, y, ws, m0, n0, warp, lane, M, N);
  if (gridDim.z == 1) return;

  // In-launch reduction: the last block of this output tile to finish sums every split's partials.
  QT_SHARED(is_last, int[1]);
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    const unsigned tile = blockIdx.y * gridDim.x + blockIdx.x;
    const unsigned before = atomicAdd(&locks[tile], 1u);
    is_last[0] = before == gridDim.z - 1;
    if (is_last[0]) atomicExch(&locks[tile], 0u);  // ready for the next launch
  }
  __syncthreads();
  if (!is_last[0]) return;
  // Each reader's own atomic on the counter (a no-op) after the other blocks' fence + atomic: the acquire
  // that orders their partials before its reads, per thread, as the emulator's race check requires.
  atomicOr(&locks[blockIdx.y * gridDim.x + blockIdx.x], 0u);
  __threadfence();
  const int cols = min(WARPS * TN * 64, N - n0), rows = min(BM, M - m0);
  if constexpr (RU == 1) {
    // One output at a time: each output's split loads wait for the last output's store (ws and y may alias, for
    // all the compiler knows), so a thread's outputs are that many rounds of L2 latency in turn.
    for (int i = tid; i < rows * cols; i += THREADS) {
      const int row = m0 + i / cols, col = n0 + i % cols;
      float sum = 0.0f;
      for (int s = 0; s < (int)gridDim.z; ++s) sum += ws[((int64_t)s * M + row) * N + col];
      y[(int64_t)row * N + col] = __float2half_rn(sum);
    }
  } else {
    // RU outputs at once, their loads in flight together, every store after them; each output's sum in split
    // order, as above (the same bits).
    for (int i0 = tid; i0 < rows * cols; i0 += THREADS * RU) {
      float sum[RU];
#pragma unroll
      for (int u = 0; u < RU; ++u) sum[u] = 0.0f;
      for (int s = 0; s < (int)gridDim.z; ++s) {
#pragma unroll
        for (int u = 0; u < RU; ++u) {
          const int i = min(i0 + u * THREADS, rows * cols - 1);  // a surplus lane reloads the last, never stored
          sum[u] += ws[((int64_t)s * M + m0 + i / cols) * N + n0 + i % cols];
        }
      }
#pragma unroll
      for (int u = 0; u < RU; ++u) {
        const int i = i0 + u * THREADS;
        if (i < rows * cols) y[(int64_t)(m0 + i / cols) * N + n0 + i % cols] = __float2half_rn(sum[u]);
      }
    }
  }
}
