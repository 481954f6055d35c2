// AVX2 + F16C attention loops: the AVX-512 ones (attention_kernels_avx512.cpp) at 8 lanes per step, with
// 16 output lanes per pass of the values so four queries' accumulators fit the 16 registers.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "common/half.h"
#include "runtime/cpu/attention_kernels.h"
#include "runtime/cpu/register_tiles.h"

namespace qt::rt {
namespace {

// Rows of one kv head are kv_dim elements apart, so a head's keys or values sit in a few cache lines per
// 2-4 KB: too sparse for the hardware prefetcher at decode, where attention is a stream from memory.
constexpr int64_t kPrefetchRows = 8;
template <typename T>
inline void prefetch_row(const T* row, int64_t d) {
  const char* p = reinterpret_cast<const char*>(row);
  for (int64_t b = 0; b < d * int64_t(sizeof(T)); b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
}

inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

inline __m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }

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

template <typename T, int NQ>
void scores_n(const float* q, int64_t q_stride, const T* k, int64_t stride, int64_t n, int64_t d, float scale,
              float* s, int64_t s_stride) {
  for (int64_t p = 0; p < n; ++p) {
    const T* kp = k + p * stride;
    if (p + kPrefetchRows < n) prefetch_row(kp + kPrefetchRows * stride, d);
    __m256 acc[NQ];
    for (int j = 0; j < NQ; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < d; i += 8) {
      const __m256 kv = load8(kp + i);
      for (int j = 0; j < NQ; ++j) acc[j] = _mm256_fmadd_ps(kv, _mm256_loadu_ps(q + j * q_stride + i), acc[j]);
    }
    // One reduction order for every query, whatever NQ: a row's scores do not depend on how many queries
    // share its pass (prefill and decode agree bit for bit).
    alignas(16) float r[4];
    _mm_store_ps(r, _mm_mul_ps(hsum4(acc[0], acc[NQ > 1 ? 1 : 0], acc[NQ > 2 ? 2 : 0], acc[NQ - 1]), _mm_set1_ps(scale)));
    for (int j = 0; j < NQ; ++j) s[j * s_stride + p] = r[j];
  }
}

template <typename T>
void scores(const float* q, int64_t q_stride, int64_t nq, const T* k, int64_t stride, int64_t n, int64_t d,
            float scale, float* s, int64_t s_stride) {
  if (d % 8 != 0) {
    if constexpr (std::is_same_v<T, uint16_t>) return kScalarAttention.scores(q, q_stride, nq, k, stride, n, d, scale, s, s_stride);
    else return kScalarAttention.scores_f32(q, q_stride, nq, k, stride, n, d, scale, s, s_stride);
  }
  in_tiles<kAttnQueries>(nq, [&](auto queries, int64_t j) {
    scores_n<T, queries()>(q + j * q_stride, q_stride, k, stride, n, d, scale, s + j * s_stride, s_stride);
  });
}

// One block of 16 keys (blocked by block_keys) for NQ queries, 8 keys a pass. Lane r of a residue's sum holds, for
// key r, what lane h of scores_n's accumulator holds: the products of elements h, h + 8, h + 16, ... fused in that
// order. hsum4 then reduces those lanes as ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7)); here that tree is
// vertical adds as the residues finish. Two residues a pass over d, eight independent chains at four queries.
template <int NQ>
__attribute__((always_inline)) inline void score_keys8(const float* q, int64_t q_stride, const float* kt, int keys,
                                                       int64_t d, float scale, float* s, int64_t s_stride) {
  // x_h + x_{h+1} for every query.
  auto pair = [&](int h, __m256 (&y)[NQ]) {
    __m256 a[NQ], b[NQ];
    for (int j = 0; j < NQ; ++j) a[j] = b[j] = _mm256_setzero_ps();
    for (int64_t i = h; i < d; i += 8) {
      const __m256 k0 = _mm256_loadu_ps(kt + i * kKeyBlock), k1 = _mm256_loadu_ps(kt + (i + 1) * kKeyBlock);
      for (int j = 0; j < NQ; ++j) {
        const float* qj = q + j * q_stride + i;
        a[j] = _mm256_fmadd_ps(k0, _mm256_set1_ps(qj[0]), a[j]);
        b[j] = _mm256_fmadd_ps(k1, _mm256_set1_ps(qj[1]), b[j]);
      }
    }
    for (int j = 0; j < NQ; ++j) y[j] = _mm256_add_ps(a[j], b[j]);
  };
  // (x_h + x_{h+1}) + (x_{h+2} + x_{h+3}).
  auto quad = [&](int h, __m256 (&y)[NQ]) {
    __m256 a[NQ], c[NQ];
    pair(h, a);
    pair(h + 2, c);
    for (int j = 0; j < NQ; ++j) y[j] = _mm256_add_ps(a[j], c[j]);
  };
  __m256 first[NQ], second[NQ];
  quad(0, first);
  quad(4, second);
  const __m256i stored = _mm256_cmpgt_epi32(_mm256_set1_epi32(keys), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int j = 0; j < NQ; ++j)
    _mm256_maskstore_ps(s + j * s_stride, stored, _mm256_mul_ps(_mm256_add_ps(first[j], second[j]), _mm256_set1_ps(scale)));
}

template <int NQ>
void scores_blocked_n(const float* q, int64_t q_stride, const float* kt, int64_t n, int64_t d, float scale, float* s,
                      int64_t s_stride) {
  for (int64_t p = 0; p < n; p += kKeyBlock)
    for (int64_t half = 0; half < 2 && p + 8 * half < n; ++half)
      score_keys8<NQ>(q, q_stride, kt + p * d + 8 * half, int(std::min<int64_t>(8, n - p - 8 * half)), d, scale,
                      s + p + 8 * half, s_stride);
}

void scores_blocked(const float* q, int64_t q_stride, int64_t nq, const float* kt, int64_t n, int64_t d, float scale,
                    float* s, int64_t s_stride) {
  in_tiles<kAttnQueries>(nq, [&](auto queries, int64_t j) {
    scores_blocked_n<queries()>(q + j * q_stride, q_stride, kt, n, d, scale, s + j * s_stride, s_stride);
  });
}

// 8 elements of 8 keys widened, then transposed in registers so that each element's 8 keys are one store. Against
// the scalar table's widening, element by element: pp512 of the 0.6B shape, 1 thread, Zen 3 EPYC, 101.8 -> 106.4
// tok/s (medians of 4 alternated rounds).
inline void transpose8(__m256 (&r)[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

void block_keys_avx2(const uint16_t* k, int64_t stride, int64_t n, int64_t d, float* kt) {
  if (d % 8 != 0) return block_keys_scalar(k, stride, n, d, kt);
  for (int64_t b = 0; b < n; b += kKeyBlock) {
    const int64_t keys = std::min(kKeyBlock, n - b);
    float* block = kt + b * d;
    for (int64_t half = 0; half < 2; ++half)
      for (int64_t i0 = 0; i0 < d; i0 += 8) {
        __m256 r[8];
        for (int64_t j = 0; j < 8; ++j) {
          const int64_t key = 8 * half + j;
          r[j] = key < keys ? load8(k + (b + key) * stride + i0) : _mm256_setzero_ps();
        }
        transpose8(r);
        for (int64_t i = 0; i < 8; ++i) _mm256_storeu_ps(block + (i0 + i) * kKeyBlock + 8 * half, r[i]);
      }
  }
}

float max_avx2(const float* s, int64_t n) {
  __m256 mx = _mm256_set1_ps(s[0]);
  int64_t p = 0;
  for (; p + 8 <= n; p += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(s + p));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  float best = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
  for (; p < n; ++p) best = std::max(best, s[p]);
  return best;
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

// 8 * BLOCKS output lanes of NQ queries in registers; BLOCKS a constant, as in attention_kernels_avx512.cpp
// (whose comment has the measurement).
template <typename T, int NQ, int BLOCKS>
__attribute__((always_inline)) inline void accumulate_lanes(const float* w, int64_t w_stride, const T* v, int64_t stride,
                                                            int64_t n, float* out, int64_t out_stride) {
  __m256 acc[NQ][BLOCKS];
  for (int j = 0; j < NQ; ++j)
    for (int b = 0; b < BLOCKS; ++b) acc[j][b] = _mm256_loadu_ps(out + j * out_stride + 8 * b);
  for (int64_t p = 0; p < n; ++p) {
    const T* vp = v + p * stride;
    if (p + kPrefetchRows < n) prefetch_row(vp + kPrefetchRows * stride, 8 * BLOCKS);
    __m256 vv[BLOCKS];
    for (int b = 0; b < BLOCKS; ++b) vv[b] = load8(vp + 8 * b);
    for (int j = 0; j < NQ; ++j) {
      const __m256 wj = _mm256_set1_ps(w[j * w_stride + p]);
      for (int b = 0; b < BLOCKS; ++b) acc[j][b] = _mm256_fmadd_ps(wj, vv[b], acc[j][b]);
    }
  }
  for (int j = 0; j < NQ; ++j)
    for (int b = 0; b < BLOCKS; ++b) _mm256_storeu_ps(out + j * out_stride + 8 * b, acc[j][b]);
}

template <typename T, int NQ>
void accumulate_n(const float* w, int64_t w_stride, const T* v, int64_t stride, int64_t n, int64_t d, float* out,
                  int64_t out_stride) {
  in_tiles<2>(d / 8, [&](auto blocks, int64_t b) {
    accumulate_lanes<T, NQ, blocks()>(w, w_stride, v + 8 * b, stride, n, out + 8 * b, out_stride);
  });
}

template <typename T>
void accumulate(const float* w, int64_t w_stride, int64_t nq, const T* v, int64_t stride, int64_t n, int64_t d,
                float* out, int64_t out_stride) {
  if (d % 8 != 0) {
    if constexpr (std::is_same_v<T, uint16_t>) return kScalarAttention.accumulate(w, w_stride, nq, v, stride, n, d, out, out_stride);
    else return kScalarAttention.accumulate_f32(w, w_stride, nq, v, stride, n, d, out, out_stride);
  }
  in_tiles<kAttnQueries>(nq, [&](auto queries, int64_t j) {
    accumulate_n<T, queries()>(w + j * w_stride, w_stride, v, stride, n, d, out + j * out_stride, out_stride);
  });
}

// exp256 takes x <= 88 (e^88 is finite): a gate below -88 has silu 0 either way. The tail is one masked step,
// so every element takes the same exp however the loop is split.
void silu_mul_avx2(float* gate, const float* up, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f), top = _mm256_set1_ps(88.0f);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(std::min<int64_t>(n - i, 8))), lane);
    const __m256 g = _mm256_maskload_ps(gate + i, m);
    const __m256 e = exp256(_mm256_min_ps(_mm256_sub_ps(_mm256_setzero_ps(), g), top));
    _mm256_maskstore_ps(gate + i, m, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_maskload_ps(up + i, m)));
  }
}

double sum_squares_avx2(const float* x, int64_t n) {
  __m256d a = _mm256_setzero_pd(), b = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256d lo = _mm256_cvtps_pd(_mm_loadu_ps(x + i)), hi = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4));
    a = _mm256_fmadd_pd(lo, lo, a);
    b = _mm256_fmadd_pd(hi, hi, b);
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(a, b));
  double ss = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) ss += double(x[i]) * double(x[i]);
  return ss;
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
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load8(x + i));
  for (; i < n; ++i) y[i] = half_bits_to_float(x[i]);
}

}  // namespace

const AttentionKernels kAvx2Attention = {.isa = Isa::kAvx2,
                                         .scores = scores<uint16_t>,
                                         .max_of = max_avx2,
                                         .exp_sum = exp_sum_avx2,
                                         .accumulate = accumulate<uint16_t>,
                                         .scores_blocked = scores_blocked,
                                         .block_keys = block_keys_avx2,
                                         .scores_f32 = scores<float>,
                                         .accumulate_f32 = accumulate<float>,
                                         .to_f16 = to_f16_avx2,
                                         .from_f16 = from_f16_avx2,
                                         .silu_mul = silu_mul_avx2,
                                         .sum_squares = sum_squares_avx2};

}  // namespace qt::rt
