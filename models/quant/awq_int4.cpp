#include "models/quant/awq_int4.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/half.h"
#include "models/core/weights.h"
#include "models/quant/rounding.h"

namespace qt::quant {

uint32_t awq_pack8(const uint8_t values[8]) {
  uint32_t word = 0;
  for (int e = 0; e < 8; ++e) word |= static_cast<uint32_t>(values[e] & 0xFu) << awq_shift(e);
  return word;
}

void quantize_awq_int4(const float* w, int64_t rows, int64_t cols, int32_t group, int32_t* qweight,
                       int32_t* qzeros, uint16_t* scales) {
  const int64_t N = rows, K = cols;
  if (group <= 0 || K % group != 0 || N % 8 != 0) {
    throw Error("quantize_awq_int4: needs N % 8 == 0 and G | K (N = " + std::to_string(N) + ", K = " +
                    std::to_string(K) + ", G = " + std::to_string(group) + ")", kExitFailure);
  }
  const int64_t words = N / 8;
  std::memset(qweight, 0, static_cast<size_t>(K * words) * sizeof(int32_t));
  std::memset(qzeros, 0, static_cast<size_t>(K / group * words) * sizeof(int32_t));
  // Per column: scale and zero per group, then each q OR-ed into its word.
  for (int64_t n = 0; n < N; ++n) {
    const float* wr = w + n * K;
    const int64_t j = n / 8;
    const int shift = awq_shift(n % 8);
    for (int64_t k0 = 0; k0 < K; k0 += group) {
      const int64_t g = k0 / group;
      float mn = wr[k0], mx = wr[k0];
      for (int64_t k = k0; k < k0 + group; ++k) {
        mn = std::fmin(mn, wr[k]);
        mx = std::fmax(mx, wr[k]);
      }
      const uint16_t sb = float_to_half_bits(std::fmax(mx - mn, 1e-5f) / 15.0f);
      const float s = half_bits_to_float(sb);
      const float zero = rint_clamp(-mn / s, 0.0f, 15.0f);
      scales[g * N + n] = sb;
      uint32_t zw = static_cast<uint32_t>(qzeros[g * words + j]);
      zw |= static_cast<uint32_t>(zero) << shift;
      qzeros[g * words + j] = static_cast<int32_t>(zw);
      for (int64_t k = k0; k < k0 + group; ++k) {
        // rint first, then add the zero point, then clamp: the order the rule states.
        const float r = std::rint(wr[k] / s);
        const float qv = rint_clamp(r + zero, 0.0f, 15.0f);
        uint32_t qw = static_cast<uint32_t>(qweight[k * words + j]);
        qw |= static_cast<uint32_t>(qv) << shift;
        qweight[k * words + j] = static_cast<int32_t>(qw);
      }
    }
  }
}

}  // namespace qt::quant
