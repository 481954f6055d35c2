// AVX2 + F16C attention loops: the AVX-512 ones (attention_kernels_avx512.cpp) at 8 lanes per step.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "common/half.h"
#include "runtime/cpu/attention_kernels.h"

namespace qt::rt {
namespace {

inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// See exp512 in attention_kernels_avx512.cpp.
inline __m256 exp256(__m256 x) {
  const __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_GE_OQ);
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(keep, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

void scores_avx2(const float* q, const uint16_t* k, int64_t stride, int64_t n, int64_t d, float scale, float* s) {
  if (d % 8 != 0) return kScalarAttention.scores(q, k, stride, n, d, scale, s);
  int64_t p = 0;
  for (; p + 2 <= n; p += 2) {
    const uint16_t* k0 = k + p * stride;
    const uint16_t* k1 = k0 + stride;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    for (int64_t i = 0; i < d; i += 8) {
      const __m256 qv = _mm256_loadu_ps(q + i);
      a0 = _mm256_fmadd_ps(load_f16(k0 + i), qv, a0);
      a1 = _mm256_fmadd_ps(load_f16(k1 + i), qv, a1);
    }
    s[p] = hsum256(a0) * scale;
    s[p + 1] = hsum256(a1) * scale;
  }
  for (; p < n; ++p) {
    const uint16_t* k0 = k + p * stride;
    __m256 a0 = _mm256_setzero_ps();
    for (int64_t i = 0; i < d; i += 8) a0 = _mm256_fmadd_ps(load_f16(k0 + i), _mm256_loadu_ps(q + i), a0);
    s[p] = hsum256(a0) * scale;
  }
}

float exp_sum_avx2(float* s, int64_t n, float mx) {
  const __m256 m = _mm256_set1_ps(mx);
  __m256 sum = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 8 <= n; p += 8) {
    const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(s + p), m));
    _mm256_storeu_ps(s + p, e);
    sum = _mm256_add_ps(sum, e);
  }
  float total = hsum256(sum);
  for (; p < n; ++p) {
    s[p] = std::exp(s[p] - mx);
    total += s[p];
  }
  return total;
}

void accumulate_avx2(const float* w, const uint16_t* v, int64_t stride, int64_t n, int64_t d, float* out) {
  if (d % 8 != 0) return kScalarAttention.accumulate(w, v, stride, n, d, out);
  for (int64_t d0 = 0; d0 < d; d0 += 64) {
    const int blocks = int(std::min<int64_t>(8, (d - d0) / 8));
    __m256 acc[8];
    for (int b = 0; b < blocks; ++b) acc[b] = _mm256_loadu_ps(out + d0 + 8 * b);
    for (int64_t p = 0; p < n; ++p) {
      const __m256 wp = _mm256_set1_ps(w[p]);
      const uint16_t* vp = v + p * stride + d0;
      for (int b = 0; b < blocks; ++b) acc[b] = _mm256_fmadd_ps(wp, load_f16(vp + 8 * b), acc[b]);
    }
    for (int b = 0; b < blocks; ++b) _mm256_storeu_ps(out + d0 + 8 * b, acc[b]);
  }
}

void scores_f32_avx2(const float* q, const float* k, int64_t stride, int64_t n, int64_t d, float scale, float* s) {
  if (d % 8 != 0) return kScalarAttention.scores_f32(q, k, stride, n, d, scale, s);
  int64_t p = 0;
  for (; p + 2 <= n; p += 2) {
    const float* k0 = k + p * stride;
    const float* k1 = k0 + stride;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    for (int64_t i = 0; i < d; i += 8) {
      const __m256 qv = _mm256_loadu_ps(q + i);
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(k0 + i), qv, a0);
      a1 = _mm256_fmadd_ps(_mm256_loadu_ps(k1 + i), qv, a1);
    }
    s[p] = hsum256(a0) * scale;
    s[p + 1] = hsum256(a1) * scale;
  }
  for (; p < n; ++p) {
    const float* k0 = k + p * stride;
    __m256 a0 = _mm256_setzero_ps();
    for (int64_t i = 0; i < d; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(k0 + i), _mm256_loadu_ps(q + i), a0);
    s[p] = hsum256(a0) * scale;
  }
}

void accumulate_f32_avx2(const float* w, const float* v, int64_t stride, int64_t n, int64_t d, float* out) {
  if (d % 8 != 0) return kScalarAttention.accumulate_f32(w, v, stride, n, d, out);
  for (int64_t d0 = 0; d0 < d; d0 += 64) {
    const int blocks = int(std::min<int64_t>(8, (d - d0) / 8));
    __m256 acc[8];
    for (int b = 0; b < blocks; ++b) acc[b] = _mm256_loadu_ps(out + d0 + 8 * b);
    for (int64_t p = 0; p < n; ++p) {
      const __m256 wp = _mm256_set1_ps(w[p]);
      const float* vp = v + p * stride + d0;
      for (int b = 0; b < blocks; ++b) acc[b] = _mm256_fmadd_ps(wp, _mm256_loadu_ps(vp + 8 * b), acc[b]);
    }
    for (int b = 0; b < blocks; ++b) _mm256_storeu_ps(out + d0 + 8 * b, acc[b]);
  }
}

void to_f16_avx2(const float* x, int64_t n, uint16_t* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) y[i] = float_to_half_bits(x[i]);
}

void from_f16_avx2(const uint16_t* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load_f16(x + i));
  for (; i < n; ++i) y[i] = half_bits_to_float(x[i]);
}

}  // namespace

const AttentionKernels kAvx2Attention = {Isa::kAvx2, scores_avx2, exp_sum_avx2, accumulate_avx2, scores_f32_avx2,
                                           accumulate_f32_avx2, to_f16_avx2, from_f16_avx2};

}  // namespace qt::rt
