#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

#include "common/half.h"

using namespace qt;

TEST_CASE("fp16 round trip is exact for every finite half value", "[half]") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float f = half_bits_to_float(bits);
    if (std::isnan(f)) {
      CHECK(std::isnan(half_bits_to_float(float_to_half_bits(f))));
      continue;
    }
    REQUIRE(float_to_half_bits(f) == bits);
  }
}

TEST_CASE("fp16 conversion rounds to nearest even at every midpoint", "[half]") {
  // The midpoint between two adjacent halves must round to the one with an even mantissa; a float just
  // above the midpoint must round up. Checked for every pair of adjacent positive finite halves.
  for (uint32_t h = 0; h < 0x7bff; ++h) {
    const float lo = half_bits_to_float(static_cast<uint16_t>(h));
    const float hi = half_bits_to_float(static_cast<uint16_t>(h + 1));
    const float mid = (lo + hi) / 2;  // exact in float: halves have 11 significant bits
    const uint16_t even = (h % 2 == 0) ? static_cast<uint16_t>(h) : static_cast<uint16_t>(h + 1);
    REQUIRE(float_to_half_bits(mid) == even);
    REQUIRE(float_to_half_bits(std::nextafter(mid, hi)) == h + 1);
    REQUIRE(float_to_half_bits(std::nextafter(mid, lo)) == h);
  }
}

TEST_CASE("fp16 overflow goes to infinity and keeps the sign", "[half]") {
  CHECK(float_to_half_bits(65504.0f) == 0x7bff);
  CHECK(float_to_half_bits(65519.99f) == 0x7bff);
  CHECK(float_to_half_bits(65520.0f) == 0x7c00);
  CHECK(float_to_half_bits(-1e9f) == 0xfc00);
  CHECK(float_to_half_bits(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(float_to_half_bits(-0.0f) == 0x8000);
}

TEST_CASE("bf16 conversion truncates with nearest-even rounding", "[half]") {
  CHECK(float_to_bf16_bits(1.0f) == 0x3f80);
  // 1 + 2^-8 is the midpoint between 1 and 1 + 2^-7: ties to even (1.0).
  CHECK(float_to_bf16_bits(1.00390625f) == 0x3f80);
  // 1 + 3*2^-8 is the midpoint between 1+2^-7 (odd) and 1+2^-6 (even): rounds up.
  CHECK(float_to_bf16_bits(1.01171875f) == 0x3f82);
  CHECK(bf16_bits_to_float(0x4049) == 3.140625f);
  CHECK(std::isnan(bf16_bits_to_float(float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()))));
}
