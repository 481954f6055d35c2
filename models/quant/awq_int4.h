#pragma once
// AWQ INT4 (AutoAWQ GEMM packing) and its round-to-nearest quantizer.
//   packing: word j of a row holds logical elements 8j..8j+7; element e sits at nibble kAwqOrder[e]
//            (kAwqOrder = {0,4,1,5,2,6,3,7}, models/core/weight_traits.h).
//   RTN:     per output column n and group of G along K: s = f16(max(mx - mn, 1e-5) / 15);
//            zero = clamp(rint(-mn / s), 0, 15); q = clamp(rint(w / s) + zero, 0, 15); w' = (q - zero) * s.
#include <cstdint>

#include "models/core/weights.h"

namespace qt::quant {

// Packs 8 logical 4-bit values (each 0..15) into one AWQ word.
uint32_t awq_pack8(const uint8_t values[8]);
// Logical element e (0..7) of an AWQ word.
inline uint8_t awq_unpack(uint32_t word, int e) { return static_cast<uint8_t>(awq_nibble(word, e)); }

// w: [N][K] floats. qweight: int32 [K][N/8]; qzeros: int32 [K/G][N/8]; scales: fp16 [K/G][N].
// Needs N % 8 == 0 and K % G == 0.
void quantize_awq_int4(const float* w, int64_t rows, int64_t cols, int32_t group, int32_t* qweight,
                       int32_t* qzeros, uint16_t* scales);

}  // namespace qt::quant
