#pragma once
// Load-time repack into the frag layout (kernels_src/fraglinear/frag_layout.h, which the CPU reference
// implements too): one thread per output word of the weights, then per scale and (INT4) per zero word, over
// one flat index space. It runs once per weight, so it reads the source codes where they lie.
#include "kernels_src/common/qt_cuda.h"
#include "kernels_src/fraglinear/frag_layout_map.h"

namespace frag {

// Element n % 8 of an AWQ word sits at nibble {0,4,1,5,2,6,3,7}[n % 8].
__device__ __forceinline__ uint32_t awq_code(const uint32_t* a, int64_t row, int col, int N) {
  if (col >= N) return 0u;
  const int e = col & 7;
  const int nibble = (e >> 1) + 4 * (e & 1);
  return (a[row * (N / 8) + col / 8] >> (4 * nibble)) & 15u;
}

}  // namespace frag

// The source layouts the repack reads (SRC):
//   kFragSrcAwq    src = AWQ qweight [K][N/8], zsrc = qzeros [K/G][N/8], scales fp16 [K/G][N]   -> 4 bits;
//   kFragSrcInt8Gw src = INT8_GW_SYM q uint8 [K][N] (+128 bias), scales fp16 [K/G][N]         -> 8 bits;
//   kFragSrcQ8_0   src = Q8_0 q int8 [N][K], scales fp32 [N][K/G], rounded to fp16 nearest-even -> 8 bits.
// zsrc is read for AWQ only. Outputs: bq (weight words), bs (scales), bz (INT4 zero words).
enum : int { kFragSrcAwq = 0, kFragSrcInt8Gw = 1, kFragSrcQ8_0 = 2 };

template <int SRC, int THREADS>
__global__ void __launch_bounds__(THREADS)
    frag_repack_kernel(const uint32_t* src, const uint32_t* zsrc, const void* scales, uint32_t* bq, __half* bs,
                       uint32_t* bz, int N, int K, int G) {
  qt::grid_dependency_entry();
  constexpr int BITS = SRC == kFragSrcAwq ? 4 : 8;
  const int n_tiles = (N + 63) / 64, ktiles = K / 16, groups = K / G;
  constexpr int TILE_WORDS = frag_map::tile_words(BITS);
  const int64_t q_words = frag_map::weight_words(BITS, N, K), s_items = frag_map::scale_halves(N, K, G);
  const int64_t z_items = frag_map::zero_words(BITS, N, K, G);
  const int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x;
  if (i < q_words) {
    const int64_t tile = i / TILE_WORDS;
    if (tile >= (int64_t)n_tiles * ktiles) {
      bq[i] = 0u;
      return;
    }
    const int nt = (int)(tile / ktiles), kt = (int)(tile % ktiles);
    const int in_tile = (int)(i % TILE_WORDS);
    const int lane = frag_map::word_lane(BITS, in_tile), f0 = frag_map::word_fragment(BITS, in_tile);
    uint32_t word = 0;
#pragma unroll
    for (int f = f0; f < f0 + (BITS == 4 ? 2 : 1); ++f) {
      const int col = nt * 64 + frag_map::frag_col(f, lane / 4);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t row = kt * 16 + frag_map::frag_row(lane % 4, e);
        uint32_t u;
        if constexpr (BITS == 4) {
          u = frag::awq_code(src, row, col, N);  // padded columns: code 0 and zero 0
        } else {
          u = 128u;  // padded columns: (u - 128) = 0
          if (col < N) {
            if constexpr (SRC == kFragSrcQ8_0)
              u = (uint32_t)((int)reinterpret_cast<const int8_t*>(src)[(int64_t)col * K + row] + 128);
            else
              u = (uint32_t)reinterpret_cast<const uint8_t*>(src)[row * N + col];
          }
        }
        word |= u << frag_map::element_shift(BITS, f, e);
      }
    }
    bq[i] = word;
    return;
  }
  const int64_t j = i - q_words;
  if (j < s_items) {
    const int64_t tg = j / frag_map::kScalesPerRun;  // column tile * groups + group
    const int nt = (int)(tg / groups), grp = (int)(tg % groups);
    const int col = nt * 64 + frag_map::scale_col((int)(j % frag_map::kScalesPerRun));
    __half v = __ushort_as_half((unsigned short)0);
    if (col < N) {
      if constexpr (SRC == kFragSrcQ8_0)
        v = __float2half_rn(reinterpret_cast<const float*>(scales)[(int64_t)col * groups + grp]);
      else
        v = reinterpret_cast<const __half*>(scales)[(int64_t)grp * N + col];
    }
    bs[j] = v;
    return;
  }
  const int64_t z = j - s_items;
  if (z < z_items) {
    const int64_t tg = z / frag_map::kZeroWordsPerRun;
    const int nt = (int)(tg / groups), grp = (int)(tg % groups), w = (int)(z % frag_map::kZeroWordsPerRun);
    const int g = w / 2, h = w % 2;  // w = zero_word(g, h)
    uint32_t word = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) word |= frag::awq_code(zsrc, grp, nt * 64 + frag_map::zero_col(g, h, i), N) << (4 * i);
    word *= 0x00010001u;  // the same nibbles in both halves
    bz[z] = word;
  }
}
