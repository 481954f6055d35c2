#pragma once
// IEEE binary16 and bfloat16 conversions with round-to-nearest-even, bit-exact with CUDA's
// __float2half_rn / __float2bfloat16_rn and numpy's astype(float16). Storage types only: arithmetic on
// these types is done in float by the caller (the emulator has its own per-operation-rounding types).
#include <bit>
#include <cstdint>

namespace qt {

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: value = mant * 2^-24, exact in float
      float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
      bits = sign | std::bit_cast<uint32_t>(v);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

inline uint16_t float_to_half_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN stays NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (a < 0x38800000u) {
    // Below the smallest normal half: adding 0.5 makes the FPU round to a multiple of 2^-24 (the half
    // subnormal step) with the current (nearest-even) rounding; the low mantissa bits are the result.
    float v = std::bit_cast<float>(a) + 0.5f;
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(v) - 0x3f000000u));
  }
  const uint32_t odd = (a >> 13) & 1u;
  a += 0xc8000fffu + odd;  // rebias exponent by -112 and add the nearest-even rounding increment
  return static_cast<uint16_t>(sign | (a >> 13));
}

inline float bf16_bits_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

inline uint16_t float_to_bf16_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  const uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

// Round a float through fp16 storage and back: what a value becomes after being written to an fp16 field.
inline float round_to_half(float f) { return half_bits_to_float(float_to_half_bits(f)); }

}  // namespace qt
