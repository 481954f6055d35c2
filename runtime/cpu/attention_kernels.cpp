#include "runtime/cpu/attention_kernels.h"

#include <cmath>

#include "common/half.h"

namespace qt::rt {
namespace {

void scores_scalar(const float* q, const uint16_t* k, int64_t stride, int64_t n, int64_t d, float scale, float* s) {
  for (int64_t p = 0; p < n; ++p) {
    const uint16_t* kp = k + p * stride;
    float acc = 0.0f;
    for (int64_t i = 0; i < d; ++i) acc += q[i] * half_bits_to_float(kp[i]);
    s[p] = acc * scale;
  }
}

float exp_sum_scalar(float* s, int64_t n, float mx) {
  float sum = 0.0f;
  for (int64_t p = 0; p < n; ++p) {
    s[p] = std::exp(s[p] - mx);
    sum += s[p];
  }
  return sum;
}

void accumulate_scalar(const float* w, const uint16_t* v, int64_t stride, int64_t n, int64_t d, float* out) {
  for (int64_t p = 0; p < n; ++p) {
    const uint16_t* vp = v + p * stride;
    for (int64_t i = 0; i < d; ++i) out[i] += w[p] * half_bits_to_float(vp[i]);
  }
}

void scores_f32_scalar(const float* q, const float* k, int64_t stride, int64_t n, int64_t d, float scale, float* s) {
  for (int64_t p = 0; p < n; ++p) {
    const float* kp = k + p * stride;
    float acc = 0.0f;
    for (int64_t i = 0; i < d; ++i) acc += q[i] * kp[i];
    s[p] = acc * scale;
  }
}

void accumulate_f32_scalar(const float* w, const float* v, int64_t stride, int64_t n, int64_t d, float* out) {
  for (int64_t p = 0; p < n; ++p) {
    const float* vp = v + p * stride;
    for (int64_t i = 0; i < d; ++i) out[i] += w[p] * vp[i];
  }
}

void to_f16_scalar(const float* x, int64_t n, uint16_t* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = float_to_half_bits(x[i]);
}

void from_f16_scalar(const uint16_t* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = half_bits_to_float(x[i]);
}

}  // namespace

const AttentionKernels kScalarAttention = {Isa::kScalar,         scores_scalar,         exp_sum_scalar,
                                           accumulate_scalar,   scores_f32_scalar,     accumulate_f32_scalar,
                                           to_f16_scalar,       from_f16_scalar};

const AttentionKernels& attention_kernels_for(Isa isa) {
  // kernels_for() has already refused an ISA this CPU cannot run.
  switch (isa) {
    case Isa::kAvx512Vnni: return kAvx512Attention;
    case Isa::kAvx2: return kAvx2Attention;
    default: return kScalarAttention;
  }
}

}  // namespace qt::rt
