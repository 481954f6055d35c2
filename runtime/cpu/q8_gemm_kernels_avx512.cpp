// AVX-512 VNNI Q8_0 GEMM: vpdpbusd multiplies the panel's 64 unsigned weight bytes (q + 128) by a token's 4
// broadcast int8 activations, 16 rows x 4 columns per instruction; up to 8 tokens share each weight load.
#include <immintrin.h>

#include <cstring>

#include "runtime/cpu/q8_gemm_group_avx512.h"
#include "runtime/cpu/q8_gemm_kernels.h"
#include "runtime/cpu/q8_gemm_tiles.h"

namespace qt::rt {
namespace {

// The line kQ8PrefetchBytes ahead (q8_gemm_kernels.h). One token (decode) only streams, and there the line goes
// to L2: on an AMD EPYC (Zen 4) prefetching it into L1 streamed the 0.6B shape's matrices about 10 % slower than
// no prefetch at all, into L2 as fast (a stand-alone loop over those matrices, 1 thread). Several tokens
// (prefill) do enough arithmetic per line for the L1 prefetch to pay: into L2 instead, prefill of 16 tokens
// lost 5-10 % on that CPU. The tables of the other kinds (DecodePrefetch) ask decode for nothing, or into L1,
// which an Intel Xeon (Ice Lake) streams faster.
template <int T, DecodePrefetch Ahead>
inline void prefetch_ahead(const uint8_t* p) {
  const char* ahead = reinterpret_cast<const char*>(p) + kQ8PrefetchBytes;
  if constexpr (T == 1) {
    if constexpr (Ahead == DecodePrefetch::kL2) _mm_prefetch(ahead, _MM_HINT_T1);
    if constexpr (Ahead == DecodePrefetch::kL1) _mm_prefetch(ahead, _MM_HINT_T0);
  } else {
    _mm_prefetch(ahead, _MM_HINT_T0);
  }
}

// T tokens against one panel. G is the group's depth when known at compile time (by_group_depth), so the
// products of a group unroll and the T integer sums stay in registers; 0 takes it at run time. (With the depth
// a run-time loop bound, GCC 12 shuffled the sums through 16 register moves and a stack slot per 8 products.)
// Each token's sums start at -128 * its activations' sum in the group, which takes out the weights' +128.
template <int T, int G, DecodePrefetch Ahead>
void tile(const uint8_t* w, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
          const float* x_scale, const int32_t* x_qsum, int64_t xs_stride, float* y, int64_t y_stride, __mmask16 rows) {
  const int64_t depth = G > 0 ? G : group;
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const int64_t ng = k / depth;
  for (int64_t g = 0; g < ng; ++g) {
    const uint8_t* wg = w + g * q8_group_bytes(depth);
    const int8_t* xg = x + g * depth;
    __m512i s[T];
    for (int t = 0; t < T; ++t) s[t] = _mm512_set1_epi32(-128 * x_qsum[t * xs_stride + g]);
    auto products = [&](int64_t c) {
      prefetch_ahead<T, Ahead>(wg + c * kQ8PanelRows);
      const __m512i wv = _mm512_loadu_si512(wg + c * kQ8PanelRows);
      for (int t = 0; t < T; ++t) s[t] = _mm512_dpbusd_epi32(s[t], wv, _mm512_set1_epi32(load4(xg + t * x_stride + c)));
    };
    if constexpr (G > 0) {
#pragma GCC unroll 16
      for (int c = 0; c < G; c += 4) products(c);
    } else {
      for (int64_t c = 0; c < depth; c += 4) products(c);
    }
    const __m512 ws = _mm512_loadu_ps(q8_group_scales(w, depth, g));
    for (int t = 0; t < T; ++t) acc[t] = add_exact_sums(acc[t], s[t], ws, x_scale[t * xs_stride + g]);
  }
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * y_stride, rows, acc[t]);
}

template <DecodePrefetch Ahead>
void panel_avx512(const uint8_t* w, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
                  const float* x_scale, const int32_t* x_qsum, int64_t xs_stride, int64_t tokens, float* y,
                  int64_t y_stride, int64_t rows) {
  if (group % 4 != 0) return kScalarQ8Gemm.panel(w, k, group, x, x_stride, x_scale, x_qsum, xs_stride, tokens, y, y_stride, rows);
  const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
  by_group_depth(group, [&](auto depth) {
    in_tiles<8>(tokens, [&](auto tokens_in_tile, int64_t t) {
      tile<tokens_in_tile(), depth(), Ahead>(w, k, group, x + t * x_stride, x_stride, x_scale + t * xs_stride,
                                      x_qsum + t * xs_stride, xs_stride, y + t * y_stride, y_stride, mask);
    });
  });
}

// T tokens against one U4 panel (q8_gemm_kernels.h): a 64-byte step is two vpdpbusd a token, its low nibbles
// against the token's 4 activations at the step's column and its high nibbles against the next 4. With fewer
// than 4 tokens the two go to sums of their own, so that decode's two multiplies a step do not wait on each other.
// Each token's sums start at -zero * its activations' sum in the group, which takes out the zero points exactly.
template <int T, int G, DecodePrefetch Ahead>
void tile_u4(const uint8_t* w, int64_t k, int64_t group, const int8_t* x, int64_t x_stride, const float* x_scale,
             const int32_t* x_qsum, int64_t xs_stride, float* y, int64_t y_stride, __mmask16 rows) {
  constexpr int S = T < 4 ? 2 : 1;
  const int64_t depth = G > 0 ? G : group;
  const __m512i nibble = _mm512_set1_epi8(15);
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const int64_t ng = k / depth;
  for (int64_t g = 0; g < ng; ++g) {
    const uint8_t* wg = w + g * u4_group_bytes(depth);
    const int8_t* xg = x + g * depth;
    const __m512i zero = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(u4_group_zeros(w, depth, g))));
    __m512i s[T][S];
    for (int t = 0; t < T; ++t) {
      s[t][0] = _mm512_mullo_epi32(zero, _mm512_set1_epi32(-x_qsum[t * xs_stride + g]));
      if constexpr (S == 2) s[t][1] = _mm512_setzero_si512();
    }
    auto products = [&](int64_t c) {
      const uint8_t* step = wg + c / kU4StepColumns * 64;
      prefetch_ahead<T, Ahead>(step);
      const __m512i wv = _mm512_loadu_si512(step);
      const __m512i lo = _mm512_and_si512(wv, nibble);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(wv, 4), nibble);
      for (int t = 0; t < T; ++t) {
        s[t][0] = _mm512_dpbusd_epi32(s[t][0], lo, _mm512_set1_epi32(load4(xg + t * x_stride + c)));
        s[t][S - 1] = _mm512_dpbusd_epi32(s[t][S - 1], hi, _mm512_set1_epi32(load4(xg + t * x_stride + c + 4)));
      }
    };
    if constexpr (G > 0) {
#pragma GCC unroll 16
      for (int c = 0; c < G; c += kU4StepColumns) products(c);
    } else {
      for (int64_t c = 0; c < depth; c += kU4StepColumns) products(c);
    }
    const __m512 ws =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(u4_group_scales(w, depth, g))));
    for (int t = 0; t < T; ++t) {
      const __m512i exact = S == 2 ? _mm512_add_epi32(s[t][0], s[t][S - 1]) : s[t][0];
      acc[t] = add_exact_sums(acc[t], exact, ws, x_scale[t * xs_stride + g]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * y_stride, rows, acc[t]);
}

template <DecodePrefetch Ahead>
void panel_u4_avx512(const uint8_t* w, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
                     const float* x_scale, const int32_t* x_qsum, int64_t xs_stride, int64_t tokens, float* y,
                     int64_t y_stride, int64_t rows) {
  if (group % kU4StepColumns != 0)
    return kScalarQ8Gemm.panel_u4(w, k, group, x, x_stride, x_scale, x_qsum, xs_stride, tokens, y, y_stride, rows);
  const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
  by_u4_group_depth(group, [&](auto depth) {
    in_tiles<8>(tokens, [&](auto tokens_in_tile, int64_t t) {
      tile_u4<tokens_in_tile(), depth(), Ahead>(w, k, group, x + t * x_stride, x_stride, x_scale + t * xs_stride,
                                                x_qsum + t * xs_stride, xs_stride, y + t * y_stride, y_stride, mask);
    });
  });
}

inline float hmax512(__m512 v) {
  __m256 m = _mm256_max_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

inline int32_t hsum_epi32(__m512i v) {
  __m256i s = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
  return _mm_cvtsi128_si32(h);
}

// vcvtps2dq rounds half to even under the default MXCSR, like nearbyint.
void quantize_row_avx512(const float* x, int64_t k, int64_t group, int8_t* q, float* scale, int32_t* qsum) {
  if (group % 16 != 0) return quantize_row_scalar(x, k, group, q, scale, qsum);
  for (int64_t g = 0; g < k / group; ++g) {
    const float* xg = x + g * group;
    __m512 amax = _mm512_setzero_ps();
    for (int64_t j = 0; j < group; j += 16) amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(xg + j)));
    const float s = hmax512(amax) / 127.0f;
    const __m512 inv = _mm512_set1_ps(s > 0.0f ? 1.0f / s : 0.0f);
    __m512i sum = _mm512_setzero_si512();
    for (int64_t j = 0; j < group; j += 16) {
      __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xg + j), inv));
      v = _mm512_max_epi32(_mm512_min_epi32(v, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + g * group + j), _mm512_cvtepi32_epi8(v));
      sum = _mm512_add_epi32(sum, v);
    }
    scale[g] = s;
    qsum[g] = hsum_epi32(sum);
  }
}

}  // namespace

const Q8GemmKernels kAvx512Q8Gemm = {Isa::kAvx512Vnni, nullptr, panel_avx512<DecodePrefetch::kL2>,
                                     quantize_row_avx512, nullptr, DecodePrefetch::kL2,
                                     panel_u4_avx512<DecodePrefetch::kL2>};
const Q8GemmKernels kAvx512Q8GemmNoPrefetch = {Isa::kAvx512Vnni, nullptr, panel_avx512<DecodePrefetch::kNone>,
                                               quantize_row_avx512, nullptr, DecodePrefetch::kNone,
                                               panel_u4_avx512<DecodePrefetch::kNone>};
const Q8GemmKernels kAvx512Q8GemmL1Prefetch = {Isa::kAvx512Vnni, nullptr, panel_avx512<DecodePrefetch::kL1>,
                                               quantize_row_avx512, nullptr, DecodePrefetch::kL1,
                                               panel_u4_avx512<DecodePrefetch::kL1>};

}  // namespace qt::rt
