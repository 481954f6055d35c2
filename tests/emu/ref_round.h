#pragma once
// Independent references for the tests: correctly rounded fp16 / bf16 results computed from exact values by
// searching the (monotonic) positive bit patterns, instead of the emulator's float/round-to-odd arithmetic.
#include <cmath>
#include <cstdint>

#include "common/half.h"

namespace qt::emu::test {

__extension__ typedef __int128 i128;  // exact fp16 products and sums in units of 2^-48

// Exact value of an fp16 in units of 2^-48 (every fp16 and every product of two is an integer there).
inline i128 half_scaled(uint16_t h) {
  const double v = static_cast<double>(qt::half_bits_to_float(h)) * 281474976710656.0;  // 2^48, exact
  return static_cast<i128>(v);
}

// Exact product of two fp16 values in units of 2^-48 (each factor is an integer multiple of 2^-24, below 2^40).
inline i128 half_product_scaled(uint16_t a, uint16_t b) {
  const double sa = static_cast<double>(qt::half_bits_to_float(a)) * 16777216.0;  // 2^24, exact
  const double sb = static_cast<double>(qt::half_bits_to_float(b)) * 16777216.0;
  return static_cast<i128>(sa) * static_cast<i128>(sb);
}

// Round-to-nearest-even of an exact value given in units of 2^-48 to fp16 bits (overflow -> inf).
inline uint16_t round_scaled_to_half(i128 v) {
  const bool neg = v < 0;
  const i128 a = neg ? -v : v;
  // Candidates 0 .. 0x7C00; 0x7C00 stands for 65536 (the next binade), where ties to even overflow to inf.
  auto val = [](uint16_t h) -> i128 { return h == 0x7C00 ? (static_cast<i128>(65536) << 48) : half_scaled(h); };
  uint16_t lo = 0, hi = 0x7C00;
  if (a >= val(hi)) return static_cast<uint16_t>((neg ? 0x8000 : 0) | 0x7C00);
  while (hi - lo > 1) {  // invariant: val(lo) <= a < val(hi)
    const uint16_t mid = static_cast<uint16_t>((lo + hi) / 2);
    if (val(mid) <= a) lo = mid; else hi = mid;
  }
  const i128 dlo = a - val(lo), dhi = val(hi) - a;
  uint16_t r = (dlo < dhi) ? lo : (dhi < dlo ? hi : ((lo & 1) ? hi : lo));
  if (r == 0 && neg) return 0x8000;
  return static_cast<uint16_t>((neg ? 0x8000 : 0) | r);
}

// Same for bf16 from an exactly representable double.
inline uint16_t round_double_to_bf16(double v) {
  const bool neg = std::signbit(v);
  const double a = std::fabs(v);
  auto val = [](uint16_t b) { return static_cast<double>(qt::bf16_bits_to_float(b)); };
  uint16_t lo = 0, hi = 0x7F80;
  while (hi - lo > 1) {
    const uint16_t mid = static_cast<uint16_t>((lo + hi) / 2);
    if (val(mid) <= a) lo = mid; else hi = mid;
  }
  const double dlo = a - val(lo), dhi = val(hi) - a;
  const uint16_t r = (dlo < dhi) ? lo : (dhi < dlo ? hi : ((lo & 1) ? hi : lo));
  return static_cast<uint16_t>((neg ? 0x8000 : 0) | r);
}

// Equality of fp16 results where an exact zero may carry either sign (the references above do not track it).
inline bool same_half(uint16_t got, uint16_t expect) {
  if ((expect & 0x7FFF) == 0) return (got & 0x7FFF) == 0;
  return got == expect;
}

}  // namespace qt::emu::test
