// AVX2 Q8_0 GEMM over the panel layout of q8_gemm_kernels.h: decode takes a panel's 16 rows at once, 3 to 15
// tokens 8 rows (one half of each 64-byte step) by 4 tokens, and 16 tokens or more a copy of the panel widened
// to int16 (tile_wide), 3 tokens at a time. Without VNNI the int8 product goes through vpmaddubsw, which needs an
// unsigned operand that cannot saturate: the weight's magnitude (|q| <= 128) times the activation carrying the
// weight's sign, so the integer sums are exactly the VNNI path's.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/cpu/q8_gemm_halves_avx2.h"
#include "runtime/cpu/q8_gemm_kernels.h"
#include "runtime/cpu/q8_gemm_tiles.h"

namespace qt::rt {
namespace {

// The line kQ8PrefetchBytes ahead (q8_gemm_kernels.h) for decode, into L2 as the AVX-512 kernel's decode asks
// for it, or into L1, or not at all, as the table says (`Ahead`). Prefill asks for nothing (see tile).
template <int T, DecodePrefetch Ahead>
inline void prefetch_ahead(const uint8_t* p) {
  const char* ahead = reinterpret_cast<const char*>(p) + kQ8PrefetchBytes;
  if constexpr (T <= 2 && Ahead == DecodePrefetch::kL2) _mm_prefetch(ahead, _MM_HINT_T1);
  if constexpr (T <= 2 && Ahead == DecodePrefetch::kL1) _mm_prefetch(ahead, _MM_HINT_T0);
}

// The products of one 32-byte half of a 64-byte step (8 rows x 4 columns) with one token's 4 activations,
// added to that token's 8 row sums. vpmaddubsw needs an unsigned operand whose products cannot saturate: the
// weight's magnitude `mag` (|q| <= 128), with the weight's sign `q` moved onto the activation.
inline __m256i add_products(__m256i s, __m256i mag, __m256i q, int32_t x4) {
  const __m256i xs = _mm256_sign_epi8(_mm256_set1_epi32(x4), q);
  return _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(mag, xs), _mm256_set1_epi16(1)));
}

// Integer adds are associative, so GCC 12 rebuilds a fully unrolled group's chain of adds into a tree to run
// them in parallel; with G = 64 (qconvert's group) the tree held the group's 32 product vectors at once and put
// about half on the stack, a store and a load per step beside the multiplies. The chain needs no parallelism (one
// add a step against a 64-byte load), so an empty asm that claims to change the sum keeps each add where the
// source puts it.
// Decode of the Qwen3-0.6B shape's matrices, 1 thread, on a Zen 3 EPYC (AVX2 only): 1.08-1.16x (medians of
// interleaved runs). Only for the unrolled group: in the loop over a depth known at run time (G = 0) there is no
// tree to undo, and the asm on an element of the sums' array, indexed before the token loop is unrolled, made GCC
// keep the whole array in memory (the 4-token tile then loaded and stored every sum at every step).
inline void keep_in_order(__m256i& sum) { asm("" : "+x"(sum)); }

// T tokens against R = 8 or 16 rows of a panel, H = R / 8 halves of each 64-byte step. Decode (T <= 2) takes
// both halves in one pass, so every cache line of the panel is used once, as it arrives (with 8 rows a pass,
// the second pass re-read each line's other half from L2), its group unrolled (G = 32) and the line 2 KB ahead
// asked for. Decode of the Qwen3-0.6B shape on a Zen 1 EPYC (AVX2 only), 1 thread: 12.4 tok/s with 8 rows a
// pass, 14.4 in one pass, 17.3-18.9 with the prefetch (77-82% of the read bandwidth). T = 4 takes
// 8 rows, as 16 rows x 4 tokens would not fit its sums in 16 registers, with the group's depth at run time
// (G = 0) and no prefetch: on that CPU it is bound by the one pipe that multiplies integers, and the unrolled
// group and the prefetch each measured 1-3% slower there.
template <int T, int H, int G, DecodePrefetch Ahead>
void tile(const uint8_t* w, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
          const float* x_scale, int64_t xs_stride, float* y, int64_t y_stride, int64_t rows) {
  const int64_t depth = G > 0 ? G : group;
  __m256 acc[T][H];
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) acc[t][h] = _mm256_setzero_ps();
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const int64_t ng = k / depth;
  for (int64_t g = 0; g < ng; ++g) {
    __m256i s[T][H];
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h) s[t][h] = _mm256_setzero_si256();
    const uint8_t* wg = w + g * q8_group_bytes(depth);
    const int8_t* xg = x + g * depth;
    auto products = [&](int64_t c) {
      prefetch_ahead<T, Ahead>(wg + c * kQ8PanelRows);
      for (int h = 0; h < H; ++h) {
        const __m256i q = _mm256_xor_si256(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wg + c * kQ8PanelRows + 32 * h)), flip);
        const __m256i mag = _mm256_sign_epi8(q, q);
        for (int t = 0; t < T; ++t) {
          s[t][h] = add_products(s[t][h], mag, q, load4(xg + t * x_stride + c));
          if constexpr (G > 0) keep_in_order(s[t][h]);
        }
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

// Prefill of many tokens on int16. vpmaddwd multiplies 16 int16 pairs on the same pipe, in the same time, as
// vpmaddubsw does 32 int8 ones, but needs no sign moved onto the activation and no widening step after it, the
// two things that kept the int8 tile off that pipe's bound (scripts/cpu/int8_pipes.cpp: vpsignb shares it).
// With both operands widened beforehand, 16 rows x 4 columns x 3 tokens are 12 vpmaddwd and 12 adds. On the
// Zen 1 EPYC of results/cpu-vs-llama.cpp-avx2.md, weights and activations in L1, 128 products take 17.8
// cycles this way and 21.2 in the int8 tile (16 is the pipe's bound); pp256 of the 0.6B shape, 1 thread, went
// from 29.2 to 32.7 tok/s, pp512 of the 30B-A3B shape from 113 to 123. The panel is widened once a call and the
// activations once a run of panels (panels_avx2), which pays off from kWideMinTokens tokens on (8, 16 and 32
// measured the same on the MoE shape, whose experts see about 16 rows of a 256-token prefill chunk each). The
// integer sums are the int8 kernel's, exactly.
constexpr int64_t kWideMinTokens = 16;

// One 32-byte half of a 64-byte step (8 rows x 4 columns, row by row) as 32 int16: the 8 rows' (k0, k1)
// pairs, then their (k2, k3) pairs, so that vpmaddwd against a token's pair broadcast leaves each row's sum in
// its own lane.
inline void widen_half(const uint8_t* src, int16_t* dst) {
  const __m256i q = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)),
                                     _mm256_set1_epi8(static_cast<char>(0x80)));
  // In each 128-bit lane (4 rows): the rows' (k0, k1) bytes, then their (k2, k3) bytes.
  const __m256i by_pair = _mm256_shuffle_epi8(
      q, _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7,
                          10, 11, 14, 15));
  const __m256i rows_0_7 = _mm256_permute4x64_epi64(by_pair, _MM_SHUFFLE(3, 1, 2, 0));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm256_cvtepi8_epi16(_mm256_castsi256_si128(rows_0_7)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 16),
                      _mm256_cvtepi8_epi16(_mm256_extracti128_si256(rows_0_7, 1)));
}

inline void widen_row(const int8_t* x, int64_t k, int16_t* dst) {
  int64_t i = 0;
  for (; i + 16 <= k; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  for (; i < k; ++i) dst[i] = x[i];
}

// T tokens (int16, x_stride apart) against the 16 rows of the panel widened by widen_half (64 int16 a step, the
// halves one after the other), both halves at once, so each activation pair serves both halves. Faster than 8
// rows a pass: pp256 of the 0.6B shape, 1 thread, 32.7 tok/s against 29.9-30.1 (Zen 1). panel_wide runs T = 3:
// 6 sums, 4 weight vectors, 2 activation pairs and 2 products fit the 16 registers. At T = 4 GCC 12 kept 3 of the
// 8 sums in memory, each step's add waiting on the store of the step before; pp512 on the Zen 4 EPYC in AVX2
// mode, 1 thread, went from 122-126 to 138-141 tok/s (0.6B shape) and from 379-398 to 486 (30B-A3B) at T = 3.
// `w`: the int8 panel, for its scales.
template <int T>
void tile_wide(const int16_t* w16, const uint8_t* w, int64_t k, int64_t group, const int16_t* x, int64_t x_stride,
               const float* x_scale, int64_t xs_stride, float* y, int64_t y_stride, int64_t rows) {
  constexpr int H = 2;
  __m256 acc[T][H];
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) acc[t][h] = _mm256_setzero_ps();
  for (int64_t g = 0; g < k / group; ++g) {
    __m256i s[T][H];
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h) s[t][h] = _mm256_setzero_si256();
    const int16_t* wg = w16 + g * group * 16;
    const int16_t* xg = x + g * group;
    // Four steps a loop pass (a loop over a run-time depth; fully unrolled at G = 32 / 64, GCC 12 spilled the sums and
    // prefill halved). Zen 3 EPYC VM, 1 thread, pp512, 12 alternated rounds: 0.6B shape median 78.9 -> 88.9 tok/s
    // (median of the paired ratios 1.12, 10 of 12 faster); 30B-A3B shape (2 layers), 3 rounds, 283 -> 306.
#pragma GCC unroll 4
    for (int64_t c = 0; c < group; c += 4) {
      __m256i w01[H], w23[H];
      for (int h = 0; h < H; ++h) {
        w01[h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wg + c * 16 + 32 * h));
        w23[h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wg + c * 16 + 32 * h + 16));
      }
      for (int t = 0; t < T; ++t) {
        int32_t x01, x23;
        std::memcpy(&x01, xg + t * x_stride + c, 4);
        std::memcpy(&x23, xg + t * x_stride + c + 2, 4);
        const __m256i b01 = _mm256_set1_epi32(x01), b23 = _mm256_set1_epi32(x23);
        for (int h = 0; h < H; ++h)
          s[t][h] = _mm256_add_epi32(s[t][h], _mm256_add_epi32(_mm256_madd_epi16(w01[h], b01),
                                                               _mm256_madd_epi16(w23[h], b23)));
      }
    }
    fold_group<T, H>(acc, s, w, group, g, x_scale, xs_stride);
  }
  store_rows<T, H>(acc, y, y_stride, rows);
}

// Widens the panel, then runs the `wide` tokens (widened by widen_row, k apart) on it, 3 at a time and the
// 1 or 2 left on a narrower wide tile (1-2% faster on the MoE shape than the int8 tiles).
void panel_wide(const uint8_t* w, int64_t k, int64_t group, const int16_t* x16, const float* x_scale,
                int64_t xs_stride, int64_t wide, float* y, int64_t y_stride, int64_t rows) {
  thread_local std::vector<int16_t> wide_w;
  wide_w.resize(size_t(k / 4 * 64));
  for (int64_t step = 0; step < k / 4; ++step) {
    const uint8_t* src = w + step * 4 / group * q8_group_bytes(group) + step * 4 % group * kQ8PanelRows;
    widen_half(src, wide_w.data() + step * 64);
    widen_half(src + 32, wide_w.data() + step * 64 + 32);
  }
  auto at = [&](auto fn, int64_t t) {
    fn(wide_w.data(), w, k, group, x16 + t * k, k, x_scale + t * xs_stride, xs_stride, y + t * y_stride, y_stride,
       rows);
  };
  int64_t t = 0;
  for (; t + 3 <= wide; t += 3) at(tile_wide<3>, t);
  if (wide - t == 2) at(tile_wide<2>, t);
  if (wide - t == 1) at(tile_wide<1>, t);
}

// One panel on the int8 tiles.
template <int G, DecodePrefetch Ahead>
void panel_tokens(const uint8_t* w, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
                  const float* x_scale, int64_t xs_stride, int64_t tokens, float* y, int64_t y_stride, int64_t rows) {
  int64_t t = 0;
  auto at = [&](auto fn, const uint8_t* wh, int64_t rh, float* yh) {
    fn(wh, k, group, x + t * x_stride, x_stride, x_scale + t * xs_stride, xs_stride, yh + t * y_stride, y_stride, rh);
  };
  if (tokens >= 3) {
    for (int64_t half = 0; half < 2 && half * 8 < rows; ++half) {
      const uint8_t* wh = w + half * 32;
      float* yh = y + half * 8;
      const int64_t rh = rows - half * 8;
      for (t = 0; t + 4 <= tokens; t += 4) at(tile<4, 1, 0, Ahead>, wh, rh, yh);
      if (tokens - t == 3) at(tile<3, 1, G, Ahead>, wh, rh, yh), t += 3;
      for (; t < tokens; t += 2)
        tokens - t >= 2 ? at(tile<2, 1, G, Ahead>, wh, rh, yh) : at(tile<1, 1, G, Ahead>, wh, rh, yh);
    }
    return;
  }
  if (tokens == 2) return at(tile<2, 2, G, Ahead>, w, rows, y);
  if (tokens == 1) at(tile<1, 2, G, Ahead>, w, rows, y);
}

// Fewer tokens than kWideMinTokens, on the int8 tiles, group by group size.
template <DecodePrefetch Ahead>
void panel_int8(const uint8_t* w, int64_t k, int64_t group, const int8_t* x, int64_t x_stride, const float* x_scale,
                int64_t xs_stride, int64_t tokens, float* y, int64_t y_stride, int64_t rows) {
  by_group_depth(group, [&](auto depth) {
    panel_tokens<depth(), Ahead>(w, k, group, x, x_stride, x_scale, xs_stride, tokens, y, y_stride, rows);
  });
}

// The activations are widened once for the whole run of panels (twice the bytes of their int8 rows, a thread; the
// backend hands at most a prefill chunk of rows, Backend::prefill_chunk()). Widened again for every panel, 4
// tokens at a time, they were about 6% of the wide tile's instructions; once a run, pp512 on the Zen 4 EPYC in
// AVX2 mode, 1 thread, went from 99-101 to 122-127 tok/s on the 0.6B shape and from 378-385 to 389-403 on the
// 30B-A3B one (results/cpu-vs-llama.cpp-avx2.md).
template <DecodePrefetch Ahead>
void panels_avx2(const uint8_t* w, int64_t count, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
                 const float* x_scale, const int32_t* x_qsum, int64_t xs_stride, int64_t tokens, float* y,
                 int64_t y_stride, int64_t rows) {
  if (group % 4 != 0)
    return run_panels(kScalarQ8Gemm, w, count, k, group, x, x_stride, x_scale, x_qsum, xs_stride, tokens, y, y_stride,
                      rows);
  const int64_t panel_bytes = q8_panel_bytes(k, group);
  const int64_t wide = tokens >= kWideMinTokens ? tokens : 0;
  thread_local std::vector<int16_t> wide_x;
  wide_x.resize(size_t(wide * k));
  for (int64_t t = 0; t < wide; ++t) widen_row(x + t * x_stride, k, wide_x.data() + t * k);
  for (int64_t p = 0; p < count; ++p) {
    const uint8_t* wp = w + p * panel_bytes;
    float* yp = y + p * kQ8PanelRows;
    const int64_t rp = std::min(kQ8PanelRows, rows - p * kQ8PanelRows);
    if (wide) {
      panel_wide(wp, k, group, wide_x.data(), x_scale, xs_stride, tokens, yp, y_stride, rp);
    } else {
      panel_int8<Ahead>(wp, k, group, x, x_stride, x_scale, xs_stride, tokens, yp, y_stride, rp);
    }
  }
}

template <DecodePrefetch Ahead>
void panel_avx2(const uint8_t* w, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
                const float* x_scale, const int32_t* x_qsum, int64_t xs_stride, int64_t tokens, float* y,
                int64_t y_stride, int64_t rows) {
  panels_avx2<Ahead>(w, 1, k, group, x, x_stride, x_scale, x_qsum, xs_stride, tokens, y, y_stride, rows);
}

// T tokens against R = 8 H rows of a U4 panel (q8_gemm_kernels.h), H halves of each 64-byte step. The nibbles
// (0-15) are vpmaddubsw's unsigned operand as they are: a pair of products is at most 2 x 15 x 127, so the low and
// the high nibbles' pairs add in int16 before one vpmaddwd widens them, 5 instructions for 64 products where the
// int8 tile needs 8. Decode (T <= 2) takes both halves in one pass, as tile does; prefill takes 4 tokens a half
// (halves from `half0` on; `w` is the panel, whose group's scales and zero points are by row).
template <int T, int H, int G, DecodePrefetch Ahead>
void tile_u4(const uint8_t* w, int64_t half0, int64_t k, int64_t group, const int8_t* x, int64_t x_stride, const float* x_scale,
             const int32_t* x_qsum, int64_t xs_stride, float* y, int64_t y_stride, int64_t rows) {
  const int64_t depth = G > 0 ? G : group;
  const __m256i nibble = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
  __m256 acc[T][H];
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) acc[t][h] = _mm256_setzero_ps();
  for (int64_t g = 0; g < k / depth; ++g) {
    const uint8_t* wg = w + g * u4_group_bytes(depth);
    const int8_t* xg = x + g * depth;
    __m256i s[T][H];
    for (int h = 0; h < H; ++h) {
      const __m256i zero = _mm256_cvtepu8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(u4_group_zeros(w, depth, g) + 8 * (half0 + h))));
      for (int t = 0; t < T; ++t) s[t][h] = _mm256_mullo_epi32(zero, _mm256_set1_epi32(-x_qsum[t * xs_stride + g]));
    }
    auto products = [&](int64_t c) {
      const uint8_t* step = wg + c / kU4StepColumns * 64;
      prefetch_ahead<T, Ahead>(step);
      for (int h = 0; h < H; ++h) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(step + 32 * (half0 + h)));
        const __m256i lo = _mm256_and_si256(v, nibble);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
        for (int t = 0; t < T; ++t) {
          const __m256i pairs =
              _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_set1_epi32(load4(xg + t * x_stride + c))),
                               _mm256_maddubs_epi16(hi, _mm256_set1_epi32(load4(xg + t * x_stride + c + 4))));
          s[t][h] = _mm256_add_epi32(s[t][h], _mm256_madd_epi16(pairs, ones));
        }
      }
    };
    if constexpr (G > 0) {
#pragma GCC unroll 16
      for (int c = 0; c < G; c += kU4StepColumns) products(c);
    } else {
      for (int64_t c = 0; c < depth; c += kU4StepColumns) products(c);
    }
    __m256 ws[H];
    for (int h = 0; h < H; ++h)
      ws[h] = _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(u4_group_scales(w, depth, g) + 8 * (half0 + h))));
    fold_sums<T, H>(acc, s, ws, g, x_scale, xs_stride);
  }
  store_rows<T, H>(acc, y, y_stride, rows);
}

template <DecodePrefetch Ahead>
void panel_u4_avx2(const uint8_t* w, int64_t k, int64_t group, const int8_t* x, int64_t x_stride,
                   const float* x_scale, const int32_t* x_qsum, int64_t xs_stride, int64_t tokens, float* y,
                   int64_t y_stride, int64_t rows) {
  if (group % kU4StepColumns != 0)
    return kScalarQ8Gemm.panel_u4(w, k, group, x, x_stride, x_scale, x_qsum, xs_stride, tokens, y, y_stride, rows);
  by_u4_group_depth(group, [&](auto depth) {
    constexpr int G = depth();
    auto at = [&](auto fn, int64_t t, int64_t half) {
      fn(w, half, k, group, x + t * x_stride, x_stride, x_scale + t * xs_stride, x_qsum + t * xs_stride,
         xs_stride, y + t * y_stride + 8 * half, y_stride, rows - 8 * half);
    };
    if (tokens <= 2) return tokens == 2 ? at(tile_u4<2, 2, G, Ahead>, 0, 0) : at(tile_u4<1, 2, G, Ahead>, 0, 0);
    for (int64_t half = 0; half < 2 && half * 8 < rows; ++half)
      in_tiles<4>(tokens, [&](auto tokens_in_tile, int64_t t) {
        at(tile_u4<tokens_in_tile(), 1, G, Ahead>, t, half);
      });
  });
}

inline float hmax256(__m256 v) {
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

}  // namespace

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

const Q8GemmKernels kAvx2Q8Gemm = {Isa::kAvx2, nullptr, panel_avx2<DecodePrefetch::kL2>, quantize_row_avx2,
                                   panels_avx2<DecodePrefetch::kL2>, DecodePrefetch::kL2,
                                   panel_u4_avx2<DecodePrefetch::kL2>};
const Q8GemmKernels kAvx2Q8GemmNoPrefetch = {Isa::kAvx2, nullptr, panel_avx2<DecodePrefetch::kNone>, quantize_row_avx2,
                                             panels_avx2<DecodePrefetch::kNone>, DecodePrefetch::kNone,
                                             panel_u4_avx2<DecodePrefetch::kNone>};
const Q8GemmKernels kAvx2Q8GemmL1Prefetch = {Isa::kAvx2, nullptr, panel_avx2<DecodePrefetch::kL1>, quantize_row_avx2,
                                             panels_avx2<DecodePrefetch::kL1>, DecodePrefetch::kL1,
                                             panel_u4_avx2<DecodePrefetch::kL1>};

}  // namespace qt::rt
