#pragma once
// Independent references for the tests: correctly rounded fp16 / bf16 results computed from exact values by
// searching the (monotonic) positive bit patterns, instead of the emulator's float/round-to-odd arithmetic.
#include <cmath>
#include <cstdint>

#include "common/half.h"

namespace qt::emu::test {

// Exact value of an fp16 in units of 2^-48 (every fp16 and every product of two is an integer there).
inline __int128 half_scaled(uint16_t h) {
  const double v = static_cast<double>(qt::half_bits_to_float(h)) * 281474976710656.0;  // 2^48, exact
  return static_cast<__int128>(v);
}

// Round-to-nearest-even of an exact value given in units of 2^-48 to fp16 bits (overflow -> inf).
inline uint16_t round_scaled_to_half(__int128 v) {
  const bool neg = v < 0;
  const __int128 a = neg ? -v : v;
  // Candidates 0 .. 0x7C00; 0x7C00 stands for 65536 (the next binade), where ties to even overflow to inf.
  auto val = [](uint16_t h) -> __int128 { return h == 0x7C00 ? (static_cast<__int128>(65536) << 48) : half_scaled(h); };
  uint16_t lo = 0, hi = 0x7C00;
  if (a >= val(hi)) return static_cast<uint16_t>((neg ? 0x8000 : 0) | 0x7C00);
  while (hi - lo > 1) {  // invariant: val(lo) <= a < val(hi)
    const uint16_t mid = static_cast<uint16_t>((lo + hi) / 2);
    if (val(mid) <= a) lo = mid; else hi = mid;
  }
  const __int128 dlo = a - val(lo), dhi = val(hi) - a;
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

}  // namespace qt::emu::test
