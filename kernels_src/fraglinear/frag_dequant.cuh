#pragma once
// Weights in the frag layout (frag_layout.h) -> fp16 W[K][N], for the dequant + cuBLASLt path: the runtime keeps
// dense AWQ and INT8 group-wise projections in the frag layout by default, so the fp16 copy is made from it.
// One thread per (16-row K tile, column tile nt, lane row class t, fragment f): the rows 2t, 2t+1, 2t+8, 2t+9 of
// the fragment's eight columns are what lanes 4g + t (g = 0..7) hold of it, one word each. A warp is one tile:
// its 32 threads (f fastest, then t) read each g's words as contiguous runs, every byte used, and each of its
// four 16-byte stores writes four whole 128-byte row segments. Bit-exact with the reference:
// fp16((code - zero) * s), the difference exact in fp16 and rounded once by the multiply.
#include "kernels_src/common/qt_cuda.h"
#include "kernels_src/fraglinear/frag_layout_map.h"

namespace frag {

// 0x6400 | c is the fp16 1024 + c for c < 1024, so the difference of two such halves is c1 - c2 exactly.
__device__ __forceinline__ uint32_t f16x2_of(uint32_t lo, uint32_t hi) { return lo | (hi << 16) | 0x64006400u; }

}  // namespace frag

// BITS = 8 (INT8_GW_SYM, zero 128, bz unused) or 4 (AWQ, zeros from bz).
template <int BITS, int THREADS>
__global__ void __launch_bounds__(THREADS)
    frag_dequant_kernel(const uint32_t* bq, const __half* bs, const uint32_t* bz, __half* w, int N, int K, int G) {
  qt::grid_dependency_entry();
  constexpr int TILE_WORDS = frag_map::tile_words(BITS);
  const int n_tiles = (N + 63) / 64;
  const int64_t item = (int64_t)blockIdx.x * THREADS + threadIdx.x;
  if (item >= (int64_t)(K / 16) * n_tiles * 32) return;
  const int f = (int)(item % 8), t = (int)(item / 8 % 4);
  const int nt = (int)(item / 32 % n_tiles), kt = (int)(item / 32 / n_tiles);
  const int j = nt * 8 + f;  // the 8-column chunk of W's row
  if (j >= N / 8) return;    // a padded fragment (N is a multiple of 8)
  const int64_t tile_group = (int64_t)nt * (K / G) + kt * 16 / G;  // (column tile, group) of the scales and zeros
  // The words lanes 4g + t hold of fragment f, g = 0..7 (tile_word steps by 16 words per g).
  const uint32_t* tile = bq + ((int64_t)nt * (K / 16) + kt) * TILE_WORDS;
  uint32_t q[8];
#pragma unroll
  for (int g = 0; g < 8; ++g) q[g] = tile[frag_map::tile_word(BITS, 4 * g + t, f)];
  // Columns 8f + 2p and 8f + 2p + 1 (p = 0..3) are neighbours in the (tile, group) run of scales: one word.
  const __half* srun = bs + tile_group * frag_map::kScalesPerRun;
  uint32_t s[4], z[4];
#pragma unroll
  for (int p = 0; p < 4; ++p)
    s[p] = *reinterpret_cast<const uint32_t*>(srun + frag_map::scale_pos(frag_map::frag_col(f, 2 * p)));
  // INT4 zeros: column 8f + g's zero is nibble f % 4 of word zero_word(g, f / 4) of the (tile, group) run.
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    if constexpr (BITS == 4) {
      const uint32_t* zrun = bz + tile_group * frag_map::kZeroWordsPerRun;
      const uint32_t lo = (zrun[frag_map::zero_word(2 * p, f / 4)] >> (4 * (f % 4))) & 15u;
      const uint32_t hi = (zrun[frag_map::zero_word(2 * p + 1, f / 4)] >> (4 * (f % 4))) & 15u;
      z[p] = frag::f16x2_of(lo, hi);
    } else {
      z[p] = frag::f16x2_of(128u, 128u);
    }
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int shift = frag_map::element_shift(BITS, f, e);
    constexpr uint32_t mask = (1u << BITS) - 1u;
    uint32_t out[4];
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const uint32_t v = frag::f16x2_of((q[2 * p] >> shift) & mask, (q[2 * p + 1] >> shift) & mask);
      out[p] = qt::mul_f16x2(qt::sub_f16x2(v, z[p]), s[p]);
    }
    const int row = kt * 16 + frag_map::frag_row(t, e);
    *reinterpret_cast<uint4*>(w + (int64_t)row * N + 8 * j) = make_uint4(out[0], out[1], out[2], out[3]);
  }
}
