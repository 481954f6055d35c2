// Portable kernels: the fallback on CPUs without AVX2 and the definition the SIMD kernels are tested against.
#include <cstring>

#include "common/half.h"
#include "kernels_src/cpu_matvec/isa_kernels.h"

namespace qt::rt {

float dot_i8_scalar(const int8_t* w, const int8_t* x, const float* w_scale, const float* x_scale, int64_t k,
                    int64_t group) {
  float acc = 0.0f;
  for (int64_t g = 0; g * group < k; ++g) {
    int32_t s = 0;
    for (int64_t i = g * group; i < (g + 1) * group; ++i) s += int32_t(w[i]) * int32_t(x[i]);
    acc += float(s) * w_scale[g] * x_scale[g];
  }
  return acc;
}

void dot_i8_x4_scalar(const int8_t* w, const int8_t* x, int64_t x_stride, const float* w_scale,
                      const float* x_scale, int64_t xs_stride, int64_t k, int64_t group, float* out) {
  for (int r = 0; r < 4; ++r) out[r] = dot_i8_scalar(w, x + r * x_stride, w_scale, x_scale + r * xs_stride, k, group);
}

float dot_u4_scalar(const uint8_t* w, const int8_t* x, const float* w_scale, const float* w_zero,
                    const float* x_scale, const int32_t* x_qsum, int64_t k, int64_t group) {
  float acc = 0.0f;
  for (int64_t g = 0; g * group < k; ++g) {
    int32_t s = 0;
    for (int64_t b = g * group; b < (g + 1) * group; b += 32) {
      const uint8_t* wb = w + b / 2;
      for (int i = 0; i < 16; ++i) {
        s += int32_t(wb[i] & 15) * x[b + i];
        s += int32_t(wb[i] >> 4) * x[b + 16 + i];
      }
    }
    acc += w_scale[g] * x_scale[g] * (float(s) - w_zero[g] * float(x_qsum[g]));
  }
  return acc;
}

namespace {

float dot_f32_scalar(const float* w, const float* x, int64_t k) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += w[i + j] * x[i + j];
  float s = 0.0f;
  for (; i < k; ++i) s += w[i] * x[i];
  for (float a : acc) s += a;
  return s;
}

float dot_f16_scalar(const uint16_t* w, const float* x, int64_t k) {
  float s = 0.0f;
  for (int64_t i = 0; i < k; ++i) s += half_bits_to_float(w[i]) * x[i];
  return s;
}

float dot_bf16_scalar(const uint16_t* w, const float* x, int64_t k) {
  float s = 0.0f;
  for (int64_t i = 0; i < k; ++i) s += bf16_bits_to_float(w[i]) * x[i];
  return s;
}

}  // namespace

const CpuKernels kScalarKernels = {Isa::kScalar, dot_i8_scalar, dot_i8_x4_scalar, dot_u4_scalar,
                                   dot_f32_scalar, dot_f16_scalar, dot_bf16_scalar};

}  // namespace qt::rt
