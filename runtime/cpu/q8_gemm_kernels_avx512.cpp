// AVX-512 VNNI Q8_0 GEMM: vpdpbusd multiplies the panel's 64 unsigned weight bytes (q + 128) by a token's 4
// broadcast int8 activations, 16 rows x 4 columns per instruction; up to 8 tokens share each weight load.
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
void tile(const uint8_t* w, const float* w_scale, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
          const float* x_scale, const int32_t* x_qsum, int64_t xs_stride, float* y, int64_t y_stride, __mmask16 rows) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const int64_t ng = k / group;
  for (int64_t g = 0; g < ng; ++g) {
    __m512i s[T];
    for (int t = 0; t < T; ++t) s[t] = _mm512_setzero_si512();
    for (int64_t c = g * group; c < (g + 1) * group; c += 4) {
      const __m512i wv = _mm512_loadu_si512(w + c * kQ8PanelRows);
      for (int t = 0; t < T; ++t) s[t] = _mm512_dpbusd_epi32(s[t], wv, _mm512_set1_epi32(load4(x + t * x_stride + c)));
    }
    const __m512 ws = _mm512_loadu_ps(w_scale + g * kQ8PanelRows);
    for (int t = 0; t < T; ++t) {
      const __m512i exact = _mm512_sub_epi32(s[t], _mm512_set1_epi32(128 * x_qsum[t * xs_stride + g]));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(exact), _mm512_mul_ps(ws, _mm512_set1_ps(x_scale[t * xs_stride + g])),
                               acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * y_stride, rows, acc[t]);
}

void panel_avx512(const uint8_t* w, const float* w_scale, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
                  const float* x_scale, const int32_t* x_qsum, int64_t xs_stride, int64_t tokens, float* y,
                  int64_t y_stride, int64_t rows) {
  if (group % 4 != 0) return kScalarQ8Gemm.panel(w, w_scale, k, group, x, x_stride, x_scale, x_qsum, xs_stride, tokens, y, y_stride, rows);
  const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
  int64_t t = 0;
  auto at = [&](auto fn) {
    fn(w, w_scale, k, group, x + t * x_stride, x_stride, x_scale + t * xs_stride, x_qsum + t * xs_stride, xs_stride,
       y + t * y_stride, y_stride, mask);
  };
  for (; t + 8 <= tokens; t += 8) at(tile<8>);
  switch (tokens - t) {
    case 7: at(tile<7>); break;
    case 6: at(tile<6>); break;
    case 5: at(tile<5>); break;
    case 4: at(tile<4>); break;
    case 3: at(tile<3>); break;
    case 2: at(tile<2>); break;
    case 1: at(tile<1>); break;
    default: break;
  }
}

}  // namespace

const Q8GemmKernels kAvx512Q8Gemm = {Isa::kAvx512Vnni, panel_avx512};

}  // namespace qt::rt
