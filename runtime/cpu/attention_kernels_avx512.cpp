// AVX-512 attention loops: fp16 keys/values widened with vcvtph2ps, 16 lanes per step, each cached row
// loaded once for up to four queries.
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

inline __m256 fold(__m512 v) {
  return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

inline float hsum512(__m512 v) {
  const __m256 s8 = fold(v);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The four sums of a, b, c, d in one vector.
inline __m128 hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m256 ab = _mm256_hadd_ps(fold(a), fold(b)), cd = _mm256_hadd_ps(fold(c), fold(d));
  const __m256 abcd = _mm256_hadd_ps(ab, cd);
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

inline __m512 load16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }

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

// Four keys' scores for NQ queries, key r at rows[r]; the first `keys` are stored at s[j * s_stride + r]. Each
// 16-lane step loads four key chunks and NQ query chunks for 4 x NQ FMAs, where one key at a time loads NQ + 1
// for NQ and the loads, not the FMAs, set the pace. Every (query, key) sum is accumulated over d in order and
// reduced by the same hsum4 tree, whichever slot it takes, so a score does not depend on how many queries or
// keys share its pass (prefill and decode agree bit for bit). Forced inline: called out of line, the full blocks'
// pass took about a fifth more of the profile (their row pointers and key count no longer constants).
template <typename T, int NQ>
__attribute__((always_inline)) inline void score_keys(const float* q, int64_t q_stride, const T* const* rows, int keys,
                                                      int64_t d, float scale, float* s, int64_t s_stride) {
  __m512 acc[NQ][4];
  for (int j = 0; j < NQ; ++j)
    for (int r = 0; r < 4; ++r) acc[j][r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < d; i += 16) {
    __m512 kv[4];
    for (int r = 0; r < 4; ++r) kv[r] = load16(rows[r] + i);
    for (int j = 0; j < NQ; ++j) {
      const __m512 qv = _mm512_loadu_ps(q + j * q_stride + i);
      for (int r = 0; r < 4; ++r) acc[j][r] = _mm512_fmadd_ps(kv[r], qv, acc[j][r]);
    }
  }
  const __mmask8 stored = static_cast<__mmask8>((1u << keys) - 1);
  for (int j = 0; j < NQ; ++j)
    _mm_mask_storeu_ps(s + j * s_stride, stored,
                       _mm_mul_ps(hsum4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]), _mm_set1_ps(scale)));
}

// Keys four at a time; the last one to three take the same pass with the last key repeated in the spare slots,
// whose scores are not stored.
template <typename T, int NQ>
void scores_n(const float* q, int64_t q_stride, const T* k, int64_t stride, int64_t n, int64_t d, float scale,
              float* s, int64_t s_stride) {
  int64_t p = 0;
  for (; p + 4 <= n; p += 4) {
    const T* kp = k + p * stride;
    for (int r = 0; r < 4; ++r)
      if (p + r + kPrefetchRows < n) prefetch_row(kp + (r + kPrefetchRows) * stride, d);
    const T* const rows[4] = {kp, kp + stride, kp + 2 * stride, kp + 3 * stride};
    score_keys<T, NQ>(q, q_stride, rows, 4, d, scale, s + p, s_stride);
  }
  if (p < n) {
    const T* rows[4];
    for (int r = 0; r < 4; ++r) rows[r] = k + std::min<int64_t>(p + r, n - 1) * stride;
    score_keys<T, NQ>(q, q_stride, rows, int(n - p), d, scale, s + p, s_stride);
  }
}

template <typename T>
void scores(const float* q, int64_t q_stride, int64_t nq, const T* k, int64_t stride, int64_t n, int64_t d,
            float scale, float* s, int64_t s_stride) {
  if (d % 16 != 0) {
    if constexpr (std::is_same_v<T, uint16_t>) return kScalarAttention.scores(q, q_stride, nq, k, stride, n, d, scale, s, s_stride);
    else return kScalarAttention.scores_f32(q, q_stride, nq, k, stride, n, d, scale, s, s_stride);
  }
  in_tiles<kAttnQueries>(nq, [&](auto queries, int64_t j) {
    scores_n<T, queries()>(q + j * q_stride, q_stride, k, stride, n, d, scale, s + j * s_stride, s_stride);
  });
}

// One block of 16 keys (blocked by block_keys) for NQ queries. Lane r of p[h] holds, for key r, what lane h of
// score_keys' accumulator holds: the products of elements h, h + 16, h + 32, ... fused in that order. The
// lanes of score_keys are then reduced by hsum4's tree, ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7)) with
// x_h = p[h] + p[h + 8]; here the same tree is a few vertical adds, evaluated as the residues finish.
template <int NQ>
__attribute__((always_inline)) inline void score_block(const float* q, int64_t q_stride, const float* kt, int keys,
                                                       int64_t d, float scale, float* s, int64_t s_stride) {
  // x = x_h and y = x_{h+1} for every query: four residues a pass over d (h, h + 8, h + 1, h + 9), sixteen
  // independent chains at four queries, where two residues a pass left the loop waiting on the FMAs' latency.
  auto residues = [&](int h, __m512 (&x)[NQ], __m512 (&y)[NQ]) {
    __m512 r[4][NQ];
    for (int c = 0; c < 4; ++c)
      for (int j = 0; j < NQ; ++j) r[c][j] = _mm512_setzero_ps();
    for (int64_t i = h; i < d; i += 16) {
      const __m512 k0 = _mm512_loadu_ps(kt + i * kKeyBlock), k1 = _mm512_loadu_ps(kt + (i + 8) * kKeyBlock);
      const __m512 k2 = _mm512_loadu_ps(kt + (i + 1) * kKeyBlock), k3 = _mm512_loadu_ps(kt + (i + 9) * kKeyBlock);
      for (int j = 0; j < NQ; ++j) {
        const float* qj = q + j * q_stride + i;
        r[0][j] = _mm512_fmadd_ps(k0, _mm512_set1_ps(qj[0]), r[0][j]);
        r[1][j] = _mm512_fmadd_ps(k1, _mm512_set1_ps(qj[8]), r[1][j]);
        r[2][j] = _mm512_fmadd_ps(k2, _mm512_set1_ps(qj[1]), r[2][j]);
        r[3][j] = _mm512_fmadd_ps(k3, _mm512_set1_ps(qj[9]), r[3][j]);
      }
    }
    for (int j = 0; j < NQ; ++j) {
      x[j] = _mm512_add_ps(r[0][j], r[1][j]);
      y[j] = _mm512_add_ps(r[2][j], r[3][j]);
    }
  };
  // (x_h + x_{h+1}) + (x_{h+2} + x_{h+3}).
  auto quad = [&](int h, __m512 (&y)[NQ]) {
    __m512 a[NQ], b[NQ], c[NQ], e[NQ];
    residues(h, a, b);
    for (int j = 0; j < NQ; ++j) a[j] = _mm512_add_ps(a[j], b[j]);
    residues(h + 2, c, e);
    for (int j = 0; j < NQ; ++j) y[j] = _mm512_add_ps(a[j], _mm512_add_ps(c[j], e[j]));
  };
  __m512 first[NQ], second[NQ];
  quad(0, first);
  quad(4, second);
  const __mmask16 stored = static_cast<__mmask16>((1u << keys) - 1);
  for (int j = 0; j < NQ; ++j)
    _mm512_mask_storeu_ps(s + j * s_stride, stored,
                          _mm512_mul_ps(_mm512_add_ps(first[j], second[j]), _mm512_set1_ps(scale)));
}

template <int NQ>
void scores_blocked_n(const float* q, int64_t q_stride, const float* kt, int64_t n, int64_t d, float scale, float* s,
                      int64_t s_stride) {
  for (int64_t p = 0; p < n; p += kKeyBlock)
    score_block<NQ>(q, q_stride, kt + p * d, int(std::min(kKeyBlock, n - p)), d, scale, s + p, s_stride);
}

void scores_blocked(const float* q, int64_t q_stride, int64_t nq, const float* kt, int64_t n, int64_t d, float scale,
                    float* s, int64_t s_stride) {
  in_tiles<kAttnQueries>(nq, [&](auto queries, int64_t j) {
    scores_blocked_n<queries()>(q + j * q_stride, q_stride, kt, n, d, scale, s + j * s_stride, s_stride);
  });
}

// 16 elements of each of a block's 16 keys widened into a 16 x 16 tile, then gathered a column at a time: the
// scalar table's software widening cost 2-3 % of a 0.6B prefill.
void block_keys_avx512(const uint16_t* k, int64_t stride, int64_t n, int64_t d, float* kt) {
  if (d % 16 != 0) return block_keys_scalar(k, stride, n, d, kt);
  alignas(64) float tile[kKeyBlock * 16];
  const __m512i column = _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240);
  for (int64_t b = 0; b < n; b += kKeyBlock) {
    const int64_t keys = std::min(kKeyBlock, n - b);
    float* block = kt + b * d;
    for (int64_t i0 = 0; i0 < d; i0 += 16) {
      for (int64_t r = 0; r < kKeyBlock; ++r)
        _mm512_store_ps(tile + r * 16, r < keys ? load16(k + (b + r) * stride + i0) : _mm512_setzero_ps());
      for (int64_t i = 0; i < 16; ++i)
        _mm512_storeu_ps(block + (i0 + i) * kKeyBlock, _mm512_i32gather_ps(column, tile + i, 4));
    }
  }
}

float max_avx512(const float* s, int64_t n) {
  __m512 mx = _mm512_set1_ps(s[0]);
  int64_t p = 0;
  for (; p + 16 <= n; p += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(s + p));
  if (p < n) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - p)) - 1);
    mx = _mm512_mask_max_ps(mx, tail, mx, _mm512_maskz_loadu_ps(tail, s + p));
  }
  return _mm512_reduce_max_ps(mx);
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

// 16 * BLOCKS output lanes (d0..) of NQ queries stay in registers while the value rows stream past once. BLOCKS
// is a constant: with the count known only at run time GCC kept the accumulators on the stack, and the loop
// ran at 1.3-1.4 TSC cycles per FMA against 0.45-0.75 (0.6B shape, fp32 values, one core of the AMX Xeon).
template <typename T, int NQ, int BLOCKS>
__attribute__((always_inline)) inline void accumulate_lanes(const float* w, int64_t w_stride, const T* v, int64_t stride,
                                                            int64_t n, float* out, int64_t out_stride) {
  __m512 acc[NQ][BLOCKS];
  for (int j = 0; j < NQ; ++j)
    for (int b = 0; b < BLOCKS; ++b) acc[j][b] = _mm512_loadu_ps(out + j * out_stride + 16 * b);
  for (int64_t p = 0; p < n; ++p) {
    const T* vp = v + p * stride;
    if (p + kPrefetchRows < n) prefetch_row(vp + kPrefetchRows * stride, 16 * BLOCKS);
    __m512 vv[BLOCKS];
    for (int b = 0; b < BLOCKS; ++b) vv[b] = load16(vp + 16 * b);
    for (int j = 0; j < NQ; ++j) {
      const __m512 wj = _mm512_set1_ps(w[j * w_stride + p]);
      for (int b = 0; b < BLOCKS; ++b) acc[j][b] = _mm512_fmadd_ps(wj, vv[b], acc[j][b]);
    }
  }
  for (int j = 0; j < NQ; ++j)
    for (int b = 0; b < BLOCKS; ++b) _mm512_storeu_ps(out + j * out_stride + 16 * b, acc[j][b]);
}

template <typename T, int NQ>
void accumulate_n(const float* w, int64_t w_stride, const T* v, int64_t stride, int64_t n, int64_t d, float* out,
                  int64_t out_stride) {
  in_tiles<4>(d / 16, [&](auto blocks, int64_t b) {
    accumulate_lanes<T, NQ, blocks()>(w, w_stride, v + 16 * b, stride, n, out + 16 * b, out_stride);
  });
}

template <typename T>
void accumulate(const float* w, int64_t w_stride, int64_t nq, const T* v, int64_t stride, int64_t n, int64_t d,
                float* out, int64_t out_stride) {
  if (d % 16 != 0) {
    if constexpr (std::is_same_v<T, uint16_t>) return kScalarAttention.accumulate(w, w_stride, nq, v, stride, n, d, out, out_stride);
    else return kScalarAttention.accumulate_f32(w, w_stride, nq, v, stride, n, d, out, out_stride);
  }
  in_tiles<kAttnQueries>(nq, [&](auto queries, int64_t j) {
    accumulate_n<T, queries()>(w + j * w_stride, w_stride, v, stride, n, d, out + j * out_stride, out_stride);
  });
}

// exp512 takes x <= 88 (e^88 is finite): a gate below -88 has silu 0 either way. The tail is one masked step,
// so every element takes the same exp.
void silu_mul_avx512(float* gate, const float* up, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f), top = _mm512_set1_ps(88.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 e = exp512(_mm512_min_ps(_mm512_sub_ps(_mm512_setzero_ps(), g), top));
    _mm512_mask_storeu_ps(gate + i, m, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_maskz_loadu_ps(m, up + i)));
  }
}

double sum_squares_avx512(const float* x, int64_t n) {
  __m512d a = _mm512_setzero_pd(), b = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512d lo = _mm512_cvtps_pd(_mm256_loadu_ps(x + i)), hi = _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8));
    a = _mm512_fmadd_pd(lo, lo, a);
    b = _mm512_fmadd_pd(hi, hi, b);
  }
  if (i < n) {  // the tail's lanes past n are zeros
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 t = _mm512_maskz_loadu_ps(m, x + i);
    const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(t));
    const __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(t), 1)));
    a = _mm512_fmadd_pd(lo, lo, a);
    b = _mm512_fmadd_pd(hi, hi, b);
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(a, b));
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
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, load16(x + i));
  for (; i < n; ++i) y[i] = half_bits_to_float(x[i]);
}

}  // namespace

const AttentionKernels kAvx512Attention = {.isa = Isa::kAvx512Vnni,
                                           .scores = scores<uint16_t>,
                                           .max_of = max_avx512,
                                           .exp_sum = exp_sum_avx512,
                                           .accumulate = accumulate<uint16_t>,
                                           .scores_blocked = scores_blocked,
                                           .block_keys = block_keys_avx512,
                                           .scores_f32 = scores<float>,
                                           .accumulate_f32 = accumulate<float>,
                                           .to_f16 = to_f16_avx512,
                                           .from_f16 = from_f16_avx512,
                                           .silu_mul = silu_mul_avx512,
                                           .sum_squares = sum_squares_avx512};

}  // namespace qt::rt
