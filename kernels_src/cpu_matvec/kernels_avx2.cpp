// AVX2 + FMA + F16C kernels (compiled with those flags; selected only when the CPU reports them).
// Included headers are limited to intrinsics and kernels.h so no shared inline function is built for AVX2.
#include <immintrin.h>

#include "common/half.h"
#include "kernels_src/cpu_matvec/isa_kernels.h"

namespace qt::rt {
namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 32 int8 products summed in 8 int32 lanes. The sign of w moves onto x so maddubs can take |w| unsigned
// (|-128| = 128 is exact as u8); pair sums stay below 2*128*127 and cannot saturate.
inline __m256i dot32(__m256i w, __m256i x) {
  const __m256i prod16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(prod16, _mm256_set1_epi16(1));
}

float dot_i8_avx2(const int8_t* w, const int8_t* x, const float* w_scale, const float* x_scale, int64_t k,
                  int64_t group) {
  if (group % 32 != 0) return dot_i8_scalar(w, x, w_scale, x_scale, k, group);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t g = 0, base = 0; base < k; ++g, base += group) {
    __m256i s = _mm256_setzero_si256();
    for (int64_t i = base; i < base + group; i += 32) {
      s = _mm256_add_epi32(s, dot32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i)),
                                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i))));
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(w_scale[g] * x_scale[g]), acc);
  }
  return hsum(acc);
}

// Same lane partition and operation order as dot_i8_avx2, with the weight chunk and its sign loaded once.
void dot_i8_x4_avx2(const int8_t* w, const int8_t* x, int64_t x_stride, const float* w_scale, const float* x_scale,
                    int64_t xs_stride, int64_t k, int64_t group, float* out) {
  if (group % 32 != 0) return dot_i8_x4_scalar(w, x, x_stride, w_scale, x_scale, xs_stride, k, group, out);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t g = 0, base = 0; base < k; ++g, base += group) {
    __m256i s[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int64_t i = base; i < base + group; i += 32) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i));
      const __m256i wabs = _mm256_sign_epi8(wv, wv);
      for (int r = 0; r < 4; ++r) {
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + r * x_stride + i));
        s[r] = _mm256_add_epi32(s[r], _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, _mm256_sign_epi8(xv, wv)), ones));
      }
    }
    for (int r = 0; r < 4; ++r)
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[r]), _mm256_set1_ps(w_scale[g] * x_scale[r * xs_stride + g]), acc[r]);
  }
  for (int r = 0; r < 4; ++r) out[r] = hsum(acc[r]);
}

float dot_u4_avx2(const uint8_t* w, const int8_t* x, const float* w_scale, const float* w_zero,
                  const float* x_scale, const int32_t* x_qsum, int64_t k, int64_t group) {
  const __m128i mask = _mm_set1_epi8(15);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc = _mm256_setzero_ps();
  __m256 corr = _mm256_setzero_ps();
  for (int64_t g = 0, base = 0; base < k; ++g, base += group) {
    __m256i s = _mm256_setzero_si256();
    for (int64_t i = base; i < base + group; i += 32) {
      const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i / 2));
      const __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), mask), _mm_and_si128(packed, mask));
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
      s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(q, xv), ones));
    }
    const float scale = w_scale[g] * x_scale[g];
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(scale), acc);
    // The zero-point term is one scalar per group; accumulate it in lane 0 only.
    corr = _mm256_add_ps(corr, _mm256_setr_ps(scale * w_zero[g] * float(x_qsum[g]), 0, 0, 0, 0, 0, 0, 0));
  }
  return hsum(_mm256_sub_ps(acc, corr));
}

float dot_f32_avx2(const float* w, const float* x, int64_t k) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
  }
  float s = hsum(_mm256_add_ps(a0, a1));
  for (; i < k; ++i) s += w[i] * x[i];
  return s;
}

float dot_f16_avx2(const uint16_t* w, const float* x, int64_t k) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i))),
                         _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i + 8))),
                         _mm256_loadu_ps(x + i + 8), a1);
  }
  float s = hsum(_mm256_add_ps(a0, a1));
  for (; i < k; ++i) {
    s += _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(w[i]))) * x[i];
  }
  return s;
}

float dot_bf16_avx2(const uint16_t* w, const float* x, int64_t k) {
  __m256 a0 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    const __m256i wi = _mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i))), 16);
    a0 = _mm256_fmadd_ps(_mm256_castsi256_ps(wi), _mm256_loadu_ps(x + i), a0);
  }
  float s = hsum(a0);
  for (; i < k; ++i) s += bf16_bits_to_float(w[i]) * x[i];
  return s;
}

}  // namespace

const CpuKernels kAvx2Kernels = {Isa::kAvx2, dot_i8_avx2, dot_i8_x4_avx2, dot_u4_avx2, dot_f32_avx2, dot_f16_avx2, dot_bf16_avx2};
// isa_kernels.h says why AVX-VNNI's dot products are these.
const CpuKernels kAvxVnniKernels = {Isa::kAvxVnni, dot_i8_avx2, dot_i8_x4_avx2, dot_u4_avx2, dot_f32_avx2, dot_f16_avx2, dot_bf16_avx2};

}  // namespace qt::rt
