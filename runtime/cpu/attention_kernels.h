#pragma once
// The inner loops of the fast path's attention over an fp16 (or fp32) KV cache, one implementation per
// instruction set, picked by the same Isa as the matmul kernels (kernels_src/cpu_matvec/isa_kernels.h).
// Scores and the weighted sum of values take up to kAttnQueries queries at once (the query heads that share a
// kv head, and neighbouring prompt rows), so each cached key and value is loaded and widened once for all of
// them. Included by translation units compiled with -mavx2 / -mavx512*: only plain functions and POD types.
#include <cstdint>

#include "kernels_src/cpu_matvec/isa_kernels.h"

namespace qt::rt {

constexpr int64_t kAttnQueries = 4;

// Keys widened to fp32 and laid out for scores_blocked: blocks of kKeyBlock keys, element i of key p at
// kt[(p / kKeyBlock) * kKeyBlock * d + i * kKeyBlock + p % kKeyBlock]; a last partial block is padded with
// zeros. A prompt's rows read every key of their kv head again and again, so prefill widens them once.
constexpr int64_t kKeyBlock = 16;
inline int64_t blocked_keys_size(int64_t n, int64_t d) { return (n + kKeyBlock - 1) / kKeyBlock * kKeyBlock * d; }

struct AttentionKernels {
  Isa isa;
  // s[j * s_stride + p] = scale * dot(q[j * q_stride + 0..d), k[p * stride + 0..d)) for j < nq, p < n;
  // keys fp16, accumulation fp32. Any nq: the SIMD tables take kAttnQueries queries a pass.
  void (*scores)(const float* q, int64_t q_stride, int64_t nq, const uint16_t* k, int64_t stride, int64_t n,
                 int64_t d, float scale, float* s, int64_t s_stride);
  // The largest of s[0..n), n >= 1.
  float (*max_of)(const float* s, int64_t n);
  // s[p] = exp(s[p] - mx) for p < n (every s[p] <= mx); returns their sum.
  float (*exp_sum)(float* s, int64_t n, float mx);
  // out[j * out_stride + i] += sum_p w[j * w_stride + p] * v[p * stride + i] for j < nq, i < d;
  // values fp16.
  void (*accumulate)(const float* w, int64_t w_stride, int64_t nq, const uint16_t* v, int64_t stride, int64_t n,
                     int64_t d, float* out, int64_t out_stride);
  // scores over keys from block_keys: the same bits as scores on those keys (each lane's partial sums over d
  // in the same order, then the same reduction tree across lanes), with a block's 16 keys in the lanes of a
  // vector, so no per-key horizontal reduction. d a multiple of kKeyBlock. Null where the ISA has none (then
  // prefill reads the cache).
  void (*scores_blocked)(const float* q, int64_t q_stride, int64_t nq, const float* kt, int64_t n, int64_t d,
                         float scale, float* s, int64_t s_stride);
  // kt (blocked_keys_size(n, d) floats) from n fp16 keys k[p * stride + 0..d).
  void (*block_keys)(const uint16_t* k, int64_t stride, int64_t n, int64_t d, float* kt);
  // The same two loops over an fp32 cache.
  void (*scores_f32)(const float* q, int64_t q_stride, int64_t nq, const float* k, int64_t stride, int64_t n,
                     int64_t d, float scale, float* s, int64_t s_stride);
  void (*accumulate_f32)(const float* w, int64_t w_stride, int64_t nq, const float* v, int64_t stride, int64_t n,
                         int64_t d, float* out, int64_t out_stride);
  // y[i] = fp16(x[i]), round to nearest even.
  void (*to_f16)(const float* x, int64_t n, uint16_t* y);
  // y[i] = float(x[i]).
  void (*from_f16)(const uint16_t* x, int64_t n, float* y);
  // gate[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i]: the feed-forward's other exp loop,
  // on the same exp as exp_sum (the scalar table's std::exp; the SIMD ones' polynomial, relative error about
  // 2e-7). Prefill of the 0.6B shape spent about 8 % of its time in this loop's calls to libm's expf.
  void (*silu_mul)(float* gate, const float* up, int64_t n);
  // The sum of x[i]^2 over i < n in double (each square exact): rmsnorm's. The scalar table's adds in order (the
  // reference's definition); the SIMD ones keep 16 or 8 running sums, where one chain of dependent double adds
  // held about 6 % of a 0.6B prefill at 1 thread (4 cycles an element over every row and every head's q and k).
  double (*sum_squares)(const float* x, int64_t n);
};

const AttentionKernels& attention_kernels_for(Isa isa);

extern const AttentionKernels kScalarAttention;
// The scalar table's block_keys, also the AVX2 table's (which has no scores_blocked to feed).
void block_keys_scalar(const uint16_t* k, int64_t stride, int64_t n, int64_t d, float* kt);
// The same layout from an fp32 cache's keys: a copy, no widening, the same on every ISA.
void block_keys_f32(const float* k, int64_t stride, int64_t n, int64_t d, float* kt);
extern const AttentionKernels kAvx2Attention;
extern const AttentionKernels kAvx512Attention;

}  // namespace qt::rt
