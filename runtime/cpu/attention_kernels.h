#pragma once
// The inner loops of the fast path's attention over an fp16 (or fp32) KV cache, one implementation per instruction set,
// picked by the same Isa as the matmul kernels (kernels_src/cpu_matvec/isa_kernels.h). Included by
// translation units compiled with -mavx2 / -mavx512*: only plain functions and POD types here.
#include <cstdint>

#include "kernels_src/cpu_matvec/isa_kernels.h"

namespace qt::rt {

struct AttentionKernels {
  Isa isa;
  // s[p] = scale * dot(q[0..d), k[p * stride + 0..d)) for p < n; keys fp16, accumulation fp32.
  void (*scores)(const float* q, const uint16_t* k, int64_t stride, int64_t n, int64_t d, float scale, float* s);
  // s[p] = exp(s[p] - mx) for p < n (every s[p] <= mx); returns their sum.
  float (*exp_sum)(float* s, int64_t n, float mx);
  // out[0..d) += sum_p w[p] * v[p * stride + 0..d) for p < n; values fp16.
  void (*accumulate)(const float* w, const uint16_t* v, int64_t stride, int64_t n, int64_t d, float* out);
  // The same two loops over an fp32 cache.
  void (*scores_f32)(const float* q, const float* k, int64_t stride, int64_t n, int64_t d, float scale, float* s);
  void (*accumulate_f32)(const float* w, const float* v, int64_t stride, int64_t n, int64_t d, float* out);
  // y[i] = fp16(x[i]), round to nearest even.
  void (*to_f16)(const float* x, int64_t n, uint16_t* y);
  // y[i] = float(x[i]).
  void (*from_f16)(const uint16_t* x, int64_t n, float* y);
};

const AttentionKernels& attention_kernels_for(Isa isa);

extern const AttentionKernels kScalarAttention;
extern const AttentionKernels kAvx2Attention;
extern const AttentionKernels kAvx512Attention;

}  // namespace qt::rt
