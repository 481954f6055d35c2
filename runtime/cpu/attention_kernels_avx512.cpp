// AVX-512 attention loops: fp16 keys/values widened with vcvtph2ps, 16 lanes per step.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "common/half.h"
#include "runtime/cpu/attention_kernels.h"

namespace qt::rt {
namespace {

inline float hsum512(__m512 v) {
  const __m256 lo = _mm512_castps512_ps256(v);
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  __m256 s8 = _mm256_add_ps(lo, hi);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m512 load_f16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// exp(x) for x <= 88: x = n ln2 + r with |r| <= ln2/2, e^r by its degree-6 Taylor polynomial (relative
// error about 2e-7), 2^n put into the exponent bits. Inputs below -87.3 give 0.
inline __m512 exp512(__m512 x) {
  const __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_LT_OQ);
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps(~tiny, p, _mm512_castsi512_ps(e));
}

void scores_avx512(const float* q, const uint16_t* k, int64_t stride, int64_t n, int64_t d, float scale, float* s) {
  if (d % 16 != 0) return kScalarAttention.scores(q, k, stride, n, d, scale, s);
  int64_t p = 0;
  // Two positions per step: two independent FMA chains and one shared horizontal reduction tail.
  for (; p + 2 <= n; p += 2) {
    const uint16_t* k0 = k + p * stride;
    const uint16_t* k1 = k0 + stride;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    for (int64_t i = 0; i < d; i += 16) {
      const __m512 qv = _mm512_loadu_ps(q + i);
      a0 = _mm512_fmadd_ps(load_f16(k0 + i), qv, a0);
      a1 = _mm512_fmadd_ps(load_f16(k1 + i), qv, a1);
    }
    s[p] = hsum512(a0) * scale;
    s[p + 1] = hsum512(a1) * scale;
  }
  for (; p < n; ++p) {
    const uint16_t* k0 = k + p * stride;
    __m512 a0 = _mm512_setzero_ps();
    for (int64_t i = 0; i < d; i += 16) a0 = _mm512_fmadd_ps(load_f16(k0 + i), _mm512_loadu_ps(q + i), a0);
    s[p] = hsum512(a0) * scale;
  }
}

float exp_sum_avx512(float* s, int64_t n, float mx) {
  const __m512 m = _mm512_set1_ps(mx);
  __m512 sum = _mm512_setzero_ps();
  int64_t p = 0;
  for (; p + 16 <= n; p += 16) {
    const __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(s + p), m));
    _mm512_storeu_ps(s + p, e);
    sum = _mm512_add_ps(sum, e);
  }
  if (p < n) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (n - p)) - 1);
    const __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, s + p), m));
    _mm512_mask_storeu_ps(s + p, mask, e);
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(mask, e));
  }
  return hsum512(sum);
}

// Up to 128 output lanes stay in registers while every position is streamed once.
void accumulate_avx512(const float* w, const uint16_t* v, int64_t stride, int64_t n, int64_t d, float* out) {
  if (d % 16 != 0) return kScalarAttention.accumulate(w, v, stride, n, d, out);
  for (int64_t d0 = 0; d0 < d; d0 += 128) {
    const int blocks = int(std::min<int64_t>(8, (d - d0) / 16));
    __m512 acc[8];
    for (int b = 0; b < blocks; ++b) acc[b] = _mm512_loadu_ps(out + d0 + 16 * b);
    for (int64_t p = 0; p < n; ++p) {
      const __m512 wp = _mm512_set1_ps(w[p]);
      const uint16_t* vp = v + p * stride + d0;
      for (int b = 0; b < blocks; ++b) acc[b] = _mm512_fmadd_ps(wp, load_f16(vp + 16 * b), acc[b]);
    }
    for (int b = 0; b < blocks; ++b) _mm512_storeu_ps(out + d0 + 16 * b, acc[b]);
  }
}

void scores_f32_avx512(const float* q, const float* k, int64_t stride, int64_t n, int64_t d, float scale, float* s) {
  if (d % 16 != 0) return kScalarAttention.scores_f32(q, k, stride, n, d, scale, s);
  int64_t p = 0;
  // Two positions per step: two independent FMA chains and one shared horizontal reduction tail.
  for (; p + 2 <= n; p += 2) {
    const float* k0 = k + p * stride;
    const float* k1 = k0 + stride;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    for (int64_t i = 0; i < d; i += 16) {
      const __m512 qv = _mm512_loadu_ps(q + i);
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(k0 + i), qv, a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(k1 + i), qv, a1);
    }
    s[p] = hsum512(a0) * scale;
    s[p + 1] = hsum512(a1) * scale;
  }
  for (; p < n; ++p) {
    const float* k0 = k + p * stride;
    __m512 a0 = _mm512_setzero_ps();
    for (int64_t i = 0; i < d; i += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(k0 + i), _mm512_loadu_ps(q + i), a0);
    s[p] = hsum512(a0) * scale;
  }
}

void accumulate_f32_avx512(const float* w, const float* v, int64_t stride, int64_t n, int64_t d, float* out) {
  if (d % 16 != 0) return kScalarAttention.accumulate_f32(w, v, stride, n, d, out);
  for (int64_t d0 = 0; d0 < d; d0 += 128) {
    const int blocks = int(std::min<int64_t>(8, (d - d0) / 16));
    __m512 acc[8];
    for (int b = 0; b < blocks; ++b) acc[b] = _mm512_loadu_ps(out + d0 + 16 * b);
    for (int64_t p = 0; p < n; ++p) {
      const __m512 wp = _mm512_set1_ps(w[p]);
      const float* vp = v + p * stride + d0;
      for (int b = 0; b < blocks; ++b) acc[b] = _mm512_fmadd_ps(wp, _mm512_loadu_ps(vp + 16 * b), acc[b]);
    }
    for (int b = 0; b < blocks; ++b) _mm512_storeu_ps(out + d0 + 16 * b, acc[b]);
  }
}

void to_f16_avx512(const float* x, int64_t n, uint16_t* y) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) y[i] = float_to_half_bits(x[i]);
}

void from_f16_avx512(const uint16_t* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, load_f16(x + i));
  for (; i < n; ++i) y[i] = half_bits_to_float(x[i]);
}

}  // namespace

const AttentionKernels kAvx512Attention = {Isa::kAvx512Vnni, scores_avx512, exp_sum_avx512, accumulate_avx512, scores_f32_avx512,
                                           accumulate_f32_avx512, to_f16_avx512, from_f16_avx512};

}  // namespace qt::rt
