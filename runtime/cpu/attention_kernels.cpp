#include "runtime/cpu/attention_kernels.h"

#include <algorithm>
#include <cmath>

#include "common/half.h"

namespace qt::rt {
namespace {

inline float widen(uint16_t h) { return half_bits_to_float(h); }
inline float widen(float f) { return f; }

template <typename T>
void scores_scalar(const float* q, int64_t q_stride, int64_t nq, const T* k, int64_t stride, int64_t n, int64_t d,
                   float scale, float* s, int64_t s_stride) {
  for (int64_t j = 0; j < nq; ++j) {
    const float* qj = q + j * q_stride;
    for (int64_t p = 0; p < n; ++p) {
      const T* kp = k + p * stride;
      float acc = 0.0f;
      for (int64_t i = 0; i < d; ++i) acc += qj[i] * widen(kp[i]);
      s[j * s_stride + p] = acc * scale;
    }
  }
}

float max_scalar(const float* s, int64_t n) { return *std::max_element(s, s + n); }

float exp_sum_scalar(float* s, int64_t n, float mx) {
  float sum = 0.0f;
  for (int64_t p = 0; p < n; ++p) {
    s[p] = std::exp(s[p] - mx);
    sum += s[p];
  }
  return sum;
}

template <typename T>
void accumulate_scalar(const float* w, int64_t w_stride, int64_t nq, const T* v, int64_t stride, int64_t n, int64_t d,
                       float* out, int64_t out_stride) {
  for (int64_t j = 0; j < nq; ++j) {
    float* oj = out + j * out_stride;
    for (int64_t p = 0; p < n; ++p) {
      const T* vp = v + p * stride;
      const float wp = w[j * w_stride + p];
      for (int64_t i = 0; i < d; ++i) oj[i] += wp * widen(vp[i]);
    }
  }
}

void to_f16_scalar(const float* x, int64_t n, uint16_t* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = float_to_half_bits(x[i]);
}

void from_f16_scalar(const uint16_t* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = half_bits_to_float(x[i]);
}

void silu_mul_scalar(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

double sum_squares_scalar(const float* x, int64_t n) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * double(x[i]);
  return ss;
}

template <typename T>
void block_keys_of(const T* k, int64_t stride, int64_t n, int64_t d, float* kt) {
  for (int64_t b = 0; b < n; b += kKeyBlock) {
    float* block = kt + b * d;
    const int64_t keys = std::min(kKeyBlock, n - b);
    for (int64_t r = 0; r < kKeyBlock; ++r)
      for (int64_t i = 0; i < d; ++i) block[i * kKeyBlock + r] = r < keys ? widen(k[(b + r) * stride + i]) : 0.0f;
  }
}

}  // namespace

void block_keys_scalar(const uint16_t* k, int64_t stride, int64_t n, int64_t d, float* kt) {
  block_keys_of(k, stride, n, d, kt);
}

void block_keys_f32(const float* k, int64_t stride, int64_t n, int64_t d, float* kt) { block_keys_of(k, stride, n, d, kt); }

const AttentionKernels kScalarAttention = {.isa = Isa::kScalar,
                                           .scores = scores_scalar<uint16_t>,
                                           .max_of = max_scalar,
                                           .exp_sum = exp_sum_scalar,
                                           .accumulate = accumulate_scalar<uint16_t>,
                                           .scores_blocked = nullptr,
                                           .block_keys = block_keys_scalar,
                                           .scores_f32 = scores_scalar<float>,
                                           .accumulate_f32 = accumulate_scalar<float>,
                                           .to_f16 = to_f16_scalar,
                                           .from_f16 = from_f16_scalar,
                                           .silu_mul = silu_mul_scalar,
                                           .sum_squares = sum_squares_scalar};

const AttentionKernels& attention_kernels_for(Isa isa) {
  // kernels_for() has already refused an ISA this CPU cannot run.
  switch (isa) {
    case Isa::kAvx512Vnni: return kAvx512Attention;
    case Isa::kAvxVnni:  // no integer products here: AVX2's loops
    case Isa::kAvx2: return kAvx2Attention;
    default: return kScalarAttention;
  }
}

}  // namespace qt::rt
