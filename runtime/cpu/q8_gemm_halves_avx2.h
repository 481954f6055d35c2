#pragma once
// What the two kernels on ymm registers (AVX2, q8_gemm_kernels_avx2.cpp; AVX-VNNI, q8_gemm_kernels_avxvnni.cpp)
// do around their products: a panel's 16 rows are two 8-float halves. Inline AVX2 code with internal linkage (as in
// q8_gemm_tiles.h, whose reason applies: the two units are built with different flags): include only from
// translation units built for AVX2.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "runtime/cpu/q8_gemm_kernels.h"

namespace qt::rt {
namespace {

// Group g's exact integer sums into the float outputs, given the rows' scales `ws` of each half: the same float
// steps, in the same order, whatever kernel made the sums and whatever format held the scales.
template <int T, int H>
void fold_sums(__m256 (&acc)[T][H], const __m256i (&s)[T][H], const __m256 (&ws)[H], int64_t g, const float* x_scale,
               int64_t xs_stride) {
  for (int h = 0; h < H; ++h)
    for (int t = 0; t < T; ++t)
      acc[t][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t][h]),
                                  _mm256_mul_ps(ws[h], _mm256_set1_ps(x_scale[t * xs_stride + g])), acc[t][h]);
}

// fold_sums on a Q8 panel's float scales. `w` + 32 h is the panel's second half for h = 1: 32 bytes are also 8
// floats, so its scales are q8_group_scales() of that pointer too.
template <int T, int H>
void fold_group(__m256 (&acc)[T][H], const __m256i (&s)[T][H], const uint8_t* w, int64_t group, int64_t g,
                const float* x_scale, int64_t xs_stride) {
  __m256 ws[H];
  for (int h = 0; h < H; ++h) ws[h] = _mm256_loadu_ps(q8_group_scales(w + 32 * h, group, g));
  fold_sums<T, H>(acc, s, ws, g, x_scale, xs_stride);
}

template <int T, int H>
void store_rows(const __m256 (&acc)[T][H], float* y, int64_t y_stride, int64_t rows) {
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      const int64_t r = rows - 8 * h;
      if (r <= 0) break;
      if (r >= 8) {
        _mm256_storeu_ps(y + t * y_stride + 8 * h, acc[t][h]);
      } else {
        float tmp[8];
        _mm256_storeu_ps(tmp, acc[t][h]);
        std::memcpy(y + t * y_stride + 8 * h, tmp, sizeof(float) * size_t(r));
      }
    }
}

}  // namespace
}  // namespace qt::rt
