// AVX2 Q8_0 GEMM over the panel layout of q8_gemm_kernels.h, 8 rows (one half of each 64-byte step) at a
// time. Without VNNI the product goes through vpmaddubsw, which needs an unsigned operand that cannot
// saturate: the weight's magnitude (|q| <= 128) times the activation carrying the weight's sign, so the
// integer sums are exactly the VNNI path's.
#include <immintrin.h>

#include <cstring>

#include "runtime/cpu/q8_gemm_kernels.h"

namespace qt::rt {
namespace {

inline int32_t load4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

template <int T>
// `w` is the panel, or the panel 32 bytes on for rows 8-15: 32 bytes are also 8 floats, so the group's scales
// for those rows are q8_group_scales() of that pointer too.
void tile(const uint8_t* w, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
          const float* x_scale, int64_t xs_stride, float* y, int64_t y_stride, int64_t rows) {
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones = _mm256_set1_epi16(1);
  const int64_t ng = k / group;
  for (int64_t g = 0; g < ng; ++g) {
    __m256i s[T];
    for (int t = 0; t < T; ++t) s[t] = _mm256_setzero_si256();
    const uint8_t* wg = w + g * q8_group_bytes(group);
    for (int64_t c = 0; c < group; c += 4) {
      const __m256i q = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wg + c * kQ8PanelRows)), flip);
      const __m256i mag = _mm256_sign_epi8(q, q);
      for (int t = 0; t < T; ++t) {
        const __m256i xs = _mm256_sign_epi8(_mm256_set1_epi32(load4(x + t * x_stride + g * group + c)), q);
        s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(_mm256_maddubs_epi16(mag, xs), ones));
      }
    }
    const __m256 ws = _mm256_loadu_ps(q8_group_scales(w, group, g));
    for (int t = 0; t < T; ++t)
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), _mm256_mul_ps(ws, _mm256_set1_ps(x_scale[t * xs_stride + g])),
                               acc[t]);
  }
  for (int t = 0; t < T; ++t) {
    if (rows >= 8) {
      _mm256_storeu_ps(y + t * y_stride, acc[t]);
    } else {
      float tmp[8];
      _mm256_storeu_ps(tmp, acc[t]);
      std::memcpy(y + t * y_stride, tmp, sizeof(float) * size_t(rows));
    }
  }
}

void panel_avx2(const uint8_t* w, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
                const float* x_scale, const int32_t* x_qsum, int64_t xs_stride, int64_t tokens, float* y,
                int64_t y_stride, int64_t rows) {
  if (group % 4 != 0) return kScalarQ8Gemm.panel(w, k, group, x, x_stride, x_scale, x_qsum, xs_stride, tokens, y, y_stride, rows);
  for (int64_t half = 0; half < 2 && half * 8 < rows; ++half) {
    const uint8_t* wh = w + half * 32;
    const int64_t rh = rows - half * 8;
    float* yh = y + half * 8;
    int64_t t = 0;
    auto at = [&](auto fn) {
      fn(wh, k, group, x + t * x_stride, x_stride, x_scale + t * xs_stride, xs_stride, yh + t * y_stride, y_stride, rh);
    };
    for (; t + 4 <= tokens; t += 4) at(tile<4>);
    switch (tokens - t) {
      case 3: at(tile<3>); break;
      case 2: at(tile<2>); break;
      case 1: at(tile<1>); break;
      default: break;
    }
  }
}

inline float hmax256(__m256 v) {
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

// vcvtps2dq rounds half to even under the default MXCSR, like nearbyint.
void quantize_row_avx2(const float* x, int64_t k, int64_t group, int8_t* q, float* scale, int32_t* qsum) {
  if (group % 8 != 0) return quantize_row_scalar(x, k, group, q, scale, qsum);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t g = 0; g < k / group; ++g) {
    const float* xg = x + g * group;
    __m256 amax = _mm256_setzero_ps();
    for (int64_t j = 0; j < group; j += 8) amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, _mm256_loadu_ps(xg + j)));
    const float s = hmax256(amax) / 127.0f;
    const __m256 inv = _mm256_set1_ps(s > 0.0f ? 1.0f / s : 0.0f);
    __m256i sum = _mm256_setzero_si256();
    for (int64_t j = 0; j < group; j += 8) {
      __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xg + j), inv));
      v = _mm256_max_epi32(_mm256_min_epi32(v, _mm256_set1_epi32(127)), _mm256_set1_epi32(-127));
      alignas(32) int32_t lanes[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
      for (int i = 0; i < 8; ++i) q[g * group + j + i] = static_cast<int8_t>(lanes[i]);
      sum = _mm256_add_epi32(sum, v);
    }
    alignas(32) int32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sum);
    scale[g] = s;
    qsum[g] = lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
  }
}

}  // namespace

const Q8GemmKernels kAvx2Q8Gemm = {Isa::kAvx2, nullptr, panel_avx2, quantize_row_avx2};

}  // namespace qt::rt
