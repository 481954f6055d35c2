// AVX-VNNI Q8_0 GEMM, for AVX2 CPUs that have the VEX-encoded vpdpbusd but no AVX-512: Intel's client cores from
// Alder Lake on and its E-core Xeons. vpdpbusd multiplies one 32-byte half of a panel's 64-byte step (8 rows x 4
// columns, unsigned q + 128) by a token's 4 broadcast int8 activations and adds the 32 products into 8 int32 sums:
// 32 products an instruction, where the AVX2 kernel needs vpmaddubsw, vpmaddwd and a sign move
// (q8_gemm_kernels_avx2.cpp) or a panel widened to int16. Each token's sums start at -128 * its activations' sum
// in the group, as in the AVX-512 kernel, so the integer sums, and after the same float steps the outputs, are the
// other kernels' bit for bit.
#include <immintrin.h>

#include <cstring>

#include "runtime/cpu/q8_gemm_halves_avx2.h"
#include "runtime/cpu/q8_gemm_kernels.h"
#include "runtime/cpu/q8_gemm_tiles.h"

namespace qt::rt {
namespace {

// The line kQ8PrefetchBytes ahead (q8_gemm_kernels.h): into L2 for decode, which only streams, and into L1 for
// several tokens, which do enough arithmetic per line for it to pay, as the AVX-512 kernel asks; decode asks for
// nothing, or into L1, in the tables of those kinds (`Ahead`).
template <int T, DecodePrefetch Ahead>
inline void prefetch_ahead(const uint8_t* p) {
  const char* ahead = reinterpret_cast<const char*>(p) + kQ8PrefetchBytes;
  if constexpr (T > 1 || Ahead == DecodePrefetch::kL1) _mm_prefetch(ahead, _MM_HINT_T0);
  if constexpr (T == 1 && Ahead == DecodePrefetch::kL2) _mm_prefetch(ahead, _MM_HINT_T1);
}

// T tokens against the 16 rows of a panel, both halves of each step, so every weight line is used once as it
// arrives. G is the group's depth when known at compile time (by_group_depth); 0 takes it at run time.
template <int T, int G, DecodePrefetch Ahead>
void tile(const uint8_t* w, int64_t k, int64_t group, const int8_t* x, int64_t x_stride, const float* x_scale,
          const int32_t* x_qsum, int64_t xs_stride, float* y, int64_t y_stride, int64_t rows) {
  constexpr int H = 2;
  const int64_t depth = G > 0 ? G : group;
  __m256 acc[T][H];
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) acc[t][h] = _mm256_setzero_ps();
  for (int64_t g = 0; g < k / depth; ++g) {
    const uint8_t* wg = w + g * q8_group_bytes(depth);
    const int8_t* xg = x + g * depth;
    __m256i s[T][H];
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h) s[t][h] = _mm256_set1_epi32(-128 * x_qsum[t * xs_stride + g]);
    auto products = [&](int64_t c) {
      prefetch_ahead<T, Ahead>(wg + c * kQ8PanelRows);
      __m256i wv[H];
      for (int h = 0; h < H; ++h)
        wv[h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wg + c * kQ8PanelRows + 32 * h));
      for (int t = 0; t < T; ++t) {
        const __m256i xb = _mm256_set1_epi32(load4(xg + t * x_stride + c));
        for (int h = 0; h < H; ++h) s[t][h] = _mm256_dpbusd_avx_epi32(s[t][h], wv[h], xb);
      }
    };
    if constexpr (G > 0) {
#pragma GCC unroll 16
      for (int c = 0; c < G; c += 4) products(c);
    } else {
      for (int64_t c = 0; c < depth; c += 4) products(c);
    }
    fold_group<T, H>(acc, s, w, depth, g, x_scale, xs_stride);
  }
  store_rows<T, H>(acc, y, y_stride, rows);
}

// Tokens kTileTokens at a time. Their 2 x kTileTokens int32 sums, the step's 2 weight vectors and a broadcast
// take the 16 ymm registers at 6; the float sums, touched once a group, live in memory between groups.
constexpr int kTileTokens = 6;

template <DecodePrefetch Ahead>
void panel_avxvnni(const uint8_t* w, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
                   const float* x_scale, const int32_t* x_qsum, int64_t xs_stride, int64_t tokens, float* y,
                   int64_t y_stride, int64_t rows) {
  if (group % 4 != 0)
    return kScalarQ8Gemm.panel(w, k, group, x, x_stride, x_scale, x_qsum, xs_stride, tokens, y, y_stride, rows);
  by_group_depth(group, [&](auto depth) {
    in_tiles<kTileTokens>(tokens, [&](auto tokens_in_tile, int64_t t) {
      tile<tokens_in_tile(), depth(), Ahead>(w, k, group, x + t * x_stride, x_stride, x_scale + t * xs_stride,
                                      x_qsum + t * xs_stride, xs_stride, y + t * y_stride, y_stride, rows);
    });
  });
}

// U4 panels on the AVX2 kernel, whose vpmaddubsw takes the nibbles with no sign to move (not yet measured
// against vpdpbusd on a CPU with AVX-VNNI).
template <const Q8GemmKernels& Avx2>
void panel_u4_avx2(const uint8_t* w, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
                   const float* x_scale, const int32_t* x_qsum, int64_t xs_stride, int64_t tokens, float* y,
                   int64_t y_stride, int64_t rows) {
  Avx2.panel_u4(w, k, group, x, x_stride, x_scale, x_qsum, xs_stride, tokens, y, y_stride, rows);
}

}  // namespace

// The activations are quantized by the AVX2 kernel's code: AVX-VNNI adds nothing there.
const Q8GemmKernels kAvxVnniQ8Gemm = {Isa::kAvxVnni, nullptr, panel_avxvnni<DecodePrefetch::kL2>, quantize_row_avx2,
                                      nullptr, DecodePrefetch::kL2, panel_u4_avx2<kAvx2Q8Gemm>};
const Q8GemmKernels kAvxVnniQ8GemmNoPrefetch = {Isa::kAvxVnni, nullptr, panel_avxvnni<DecodePrefetch::kNone>,
                                                quantize_row_avx2, nullptr, DecodePrefetch::kNone,
                                                panel_u4_avx2<kAvx2Q8GemmNoPrefetch>};
const Q8GemmKernels kAvxVnniQ8GemmL1Prefetch = {Isa::kAvxVnni, nullptr, panel_avxvnni<DecodePrefetch::kL1>,
                                                quantize_row_avx2, nullptr, DecodePrefetch::kL1,
                                                panel_u4_avx2<kAvx2Q8GemmL1Prefetch>};

}  // namespace qt::rt
