// AVX-512 (F, BW, VL) + VNNI kernels: vpdpbusd does the int8 multiply-accumulate in one instruction.
// Groups that are a multiple of 64 use 512-bit vectors; multiples of 32 use the 256-bit VNNI form.
#include <immintrin.h>

#include "common/half.h"
#include "kernels_src/cpu_matvec/isa_kernels.h"

namespace qt::rt {
namespace {

inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Sum of 16 lanes without _mm512_reduce_add_ps, whose GCC 12 expansion trips -Werror=uninitialized.
inline float hsum512(__m512 v) {
  const __m256 lo = _mm512_castps512_ps256(v);
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  return hsum256(_mm256_add_ps(lo, hi));
}

// |w| (unsigned, exact for -128) times x with w's sign, accumulated by vpdpbusd.
inline __m512i dot64(__m512i acc, __m512i w, __m512i x) {
  const __mmask64 neg = _mm512_movepi8_mask(w);
  const __m512i xs = _mm512_mask_sub_epi8(x, neg, _mm512_setzero_si512(), x);
  return _mm512_dpbusd_epi32(acc, _mm512_abs_epi8(w), xs);
}

inline __m256i dot32(__m256i acc, __m256i w, __m256i x) {
  return _mm256_dpbusd_epi32(acc, _mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

float dot_i8_avx512(const int8_t* w, const int8_t* x, const float* w_scale, const float* x_scale, int64_t k,
                    int64_t group) {
  if (group % 64 == 0) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t g = 0, base = 0; base < k; ++g, base += group) {
      __m512i s = _mm512_setzero_si512();
      for (int64_t i = base; i < base + group; i += 64) {
        s = dot64(s, _mm512_loadu_si512(w + i), _mm512_loadu_si512(x + i));
      }
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(w_scale[g] * x_scale[g]), acc);
    }
    return hsum512(acc);
  }
  if (group % 32 != 0) return dot_i8_scalar(w, x, w_scale, x_scale, k, group);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t g = 0, base = 0; base < k; ++g, base += group) {
    __m256i s = _mm256_setzero_si256();
    for (int64_t i = base; i < base + group; i += 32) {
      s = dot32(s, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i)),
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(w_scale[g] * x_scale[g]), acc);
  }
  return hsum256(acc);
}

// Same lane partition and operation order as dot_i8_avx512, with each weight chunk's magnitude and sign
// computed once for four activation rows.
void dot_i8_x4_avx512(const int8_t* w, const int8_t* x, int64_t x_stride, const float* w_scale, const float* x_scale,
                      int64_t xs_stride, int64_t k, int64_t group, float* out) {
  if (group % 64 == 0) {
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t g = 0, base = 0; base < k; ++g, base += group) {
      __m512i s[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
      for (int64_t i = base; i < base + group; i += 64) {
        const __m512i wv = _mm512_loadu_si512(w + i);
        const __mmask64 neg = _mm512_movepi8_mask(wv);
        const __m512i wabs = _mm512_abs_epi8(wv);
        for (int r = 0; r < 4; ++r) {
          const __m512i xv = _mm512_loadu_si512(x + r * x_stride + i);
          s[r] = _mm512_dpbusd_epi32(s[r], wabs, _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv));
        }
      }
      for (int r = 0; r < 4; ++r)
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[r]), _mm512_set1_ps(w_scale[g] * x_scale[r * xs_stride + g]), acc[r]);
    }
    for (int r = 0; r < 4; ++r) out[r] = hsum512(acc[r]);
    return;
  }
  if (group % 32 != 0) return dot_i8_x4_scalar(w, x, x_stride, w_scale, x_scale, xs_stride, k, group, out);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t g = 0, base = 0; base < k; ++g, base += group) {
    __m256i s[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int64_t i = base; i < base + group; i += 32) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i));
      const __m256i wabs = _mm256_sign_epi8(wv, wv);
      for (int r = 0; r < 4; ++r) {
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + r * x_stride + i));
        s[r] = _mm256_dpbusd_epi32(s[r], wabs, _mm256_sign_epi8(xv, wv));
      }
    }
    for (int r = 0; r < 4; ++r)
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r]), _mm256_set1_ps(w_scale[g] * x_scale[r * xs_stride + g]), acc[r]);
  }
  for (int r = 0; r < 4; ++r) out[r] = hsum256(acc[r]);
}

float dot_u4_avx512(const uint8_t* w, const int8_t* x, const float* w_scale, const float* w_zero,
                    const float* x_scale, const int32_t* x_qsum, int64_t k, int64_t group) {
  const __m128i mask = _mm_set1_epi8(15);
  __m256 acc = _mm256_setzero_ps();
  float corr = 0.0f;
  for (int64_t g = 0, base = 0; base < k; ++g, base += group) {
    __m256i s = _mm256_setzero_si256();
    for (int64_t i = base; i < base + group; i += 32) {
      const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i / 2));
      const __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), mask), _mm_and_si128(packed, mask));
      s = _mm256_dpbusd_epi32(s, q, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
    }
    const float scale = w_scale[g] * x_scale[g];
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(scale), acc);
    corr += scale * w_zero[g] * float(x_qsum[g]);
  }
  return hsum256(acc) - corr;
}

float dot_f32_avx512(const float* w, const float* x, int64_t k) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16), _mm512_loadu_ps(x + i + 16), a1);
  }
  for (; i + 16 <= k; i += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), a0);
  float s = hsum512(_mm512_add_ps(a0, a1));
  for (; i < k; ++i) s += w[i] * x[i];
  return s;
}

float dot_f16_avx512(const uint16_t* w, const float* x, int64_t k) {
  __m512 a0 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    a0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i))),
                         _mm512_loadu_ps(x + i), a0);
  }
  float s = hsum512(a0);
  for (; i < k; ++i) s += _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(w[i]))) * x[i];
  return s;
}

float dot_bf16_avx512(const uint16_t* w, const float* x, int64_t k) {
  __m512 a0 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    const __m512i wi = _mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i))), 16);
    a0 = _mm512_fmadd_ps(_mm512_castsi512_ps(wi), _mm512_loadu_ps(x + i), a0);
  }
  float s = hsum512(a0);
  for (; i < k; ++i) s += bf16_bits_to_float(w[i]) * x[i];
  return s;
}

}  // namespace

const CpuKernels kAvx512Kernels = {Isa::kAvx512Vnni, dot_i8_avx512, dot_i8_x4_avx512, dot_u4_avx512,
                                   dot_f32_avx512, dot_f16_avx512, dot_bf16_avx512};

}  // namespace qt::rt
