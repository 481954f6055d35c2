#include "runtime/cpu/dequant.h"

#include <cstring>

#include "common/error.h"
#include "common/half.h"

namespace qt::rt {

void dequant_row(const QTensor& t, int64_t row, float* out) {
  const int64_t K = t.cols, N = t.rows, G = t.group_size;
  switch (t.type) {
    case WeightType::F32:
      std::memcpy(out, static_cast<const float*>(t.data) + row * K, sizeof(float) * size_t(K));
      return;
    case WeightType::F16: {
      const uint16_t* p = static_cast<const uint16_t*>(t.data) + row * K;
      for (int64_t k = 0; k < K; ++k) out[k] = half_bits_to_float(p[k]);
      return;
    }
    case WeightType::BF16: {
      const uint16_t* p = static_cast<const uint16_t*>(t.data) + row * K;
      for (int64_t k = 0; k < K; ++k) out[k] = bf16_bits_to_float(p[k]);
      return;
    }
    case WeightType::Q8_0: {
      const int8_t* q = static_cast<const int8_t*>(t.data) + row * K;
      const float* s = t.scales_f32 + row * K / G;
      for (int64_t k = 0; k < K; ++k) out[k] = float(q[k]) * s[k / G];
      return;
    }
    case WeightType::INT8_GW_SYM:
    case WeightType::INT8_GW_ASYM: {
      const uint8_t* q = static_cast<const uint8_t*>(t.data);
      const bool asym = t.type == WeightType::INT8_GW_ASYM;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t gi = (k / G) * N + row;
        float v = float(int32_t(q[k * N + row]) - 128) * half_bits_to_float(t.scales_f16[gi]);
        if (asym) v += half_bits_to_float(t.zeros_f16[gi]);
        out[k] = v;
      }
      return;
    }
    case WeightType::AWQ_INT4: {
      const int32_t* qw = static_cast<const int32_t*>(t.data);
      const int64_t words = N / 8, j = row / 8, shift = 4 * kAwqOrder[row % 8];
      for (int64_t k = 0; k < K; ++k) {
        const int64_t g = k / G;
        const uint32_t q = (uint32_t(qw[k * words + j]) >> shift) & 15u;
        const uint32_t z = (uint32_t(t.qzeros[g * words + j]) >> shift) & 15u;
        out[k] = (float(q) - float(z)) * half_bits_to_float(t.scales_f16[g * N + row]);
      }
      return;
    }
  }
  throw Error("dequant_row: unknown weight type");
}

}  // namespace qt::rt
