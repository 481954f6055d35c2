#include "models/quant/int8_gw.h"

#include <cmath>
#include <string>

#include "common/error.h"
#include "common/half.h"
#include "models/quant/rounding.h"

namespace qt::quant {

void quantize_int8_gw(const float* w, int64_t rows, int64_t cols, int32_t group, bool asymmetric, uint8_t* q,
                      uint16_t* scales, uint16_t* zeros) {
  if (group <= 0 || cols % group != 0) {
    throw Error("quantize_int8_gw: group size " + std::to_string(group) + " does not divide K = " +
                    std::to_string(cols), kExitFailure);
  }
  const int64_t N = rows, K = cols;
  for (int64_t n = 0; n < N; ++n) {
    const float* wr = w + n * K;
    for (int64_t k0 = 0; k0 < K; k0 += group) {
      const int64_t g = k0 / group;
      if (!asymmetric) {
        float amax = 0.0f;
        for (int64_t k = k0; k < k0 + group; ++k) amax = std::fmax(amax, std::fabs(wr[k]));
        const uint16_t sb = float_to_half_bits(amax / 127.0f);
        const float s = half_bits_to_float(sb);
        scales[g * N + n] = sb;
        for (int64_t k = k0; k < k0 + group; ++k) {
          const float v = s == 0.0f ? 0.0f : rint_clamp(wr[k] / s, -127.0f, 127.0f);
          q[k * N + n] = static_cast<uint8_t>(static_cast<int>(v) + 128);
        }
      } else {
        float mn = wr[k0], mx = wr[k0];
        for (int64_t k = k0; k < k0 + group; ++k) {
          mn = std::fmin(mn, wr[k]);
          mx = std::fmax(mx, wr[k]);
        }
        const uint16_t sb = float_to_half_bits((mx - mn) / 255.0f);
        const float s = half_bits_to_float(sb);
        const uint16_t zb = float_to_half_bits(mn + 128.0f * s);
        const float z = half_bits_to_float(zb);
        scales[g * N + n] = sb;
        zeros[g * N + n] = zb;
        for (int64_t k = k0; k < k0 + group; ++k) {
          const float v = s == 0.0f ? 0.0f : rint_clamp((wr[k] - z) / s, -128.0f, 127.0f);
          q[k * N + n] = static_cast<uint8_t>(static_cast<int>(v) + 128);
        }
      }
    }
  }
}

}  // namespace qt::quant
