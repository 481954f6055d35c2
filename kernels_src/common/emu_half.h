#pragma once
// Host twins of CUDA's __half / __half2 / __nv_bfloat16 / __nv_bfloat162 for the emulator (QT_EMU builds).
// Every arithmetic operation rounds its exact result once to the storage format with round-to-nearest-even,
// as the GPU's add/sub/mul/fma.rn.{f16,bf16}{,x2} do. +,-,*,/ are computed in float and then rounded: float
// has 24 >= 2*11+2 significant bits, so the double rounding is exact (Figueroa). fma is computed exactly
// (product exact in double, TwoSum for the addition) and rounded to odd before the final rounding.
#include <bit>
#include <cmath>
#include <cstdint>

#include "common/half.h"

namespace qt::emu {

// Round x + e (e: the exact error of the double addition that produced x) to float with round-to-odd, so
// that a later round-to-nearest-even to <= 22 bits is correctly rounded.
inline float round_to_odd_float(double x, double e) {
  float f = static_cast<float>(x);
  const double back = static_cast<double>(f);
  if (back == x && e == 0.0) return f;
  // Truncate toward zero to 24 bits, then set the last bit (round to odd).
  const double exact_sign = (x != 0.0) ? x : e;
  if (std::fabs(back) > std::fabs(x) || (back == x && (e < 0) == (exact_sign > 0))) {
    f = std::nextafter(f, 0.0f);
  }
  uint32_t bits = std::bit_cast<uint32_t>(f);
  bits |= 1u;
  return std::bit_cast<float>(bits);
}

// Exactly rounded a*b+c for inputs exactly representable in float with at most 11 significant bits each.
inline float fma_exact_to_odd(float a, float b, float c) {
  const double p = static_cast<double>(a) * static_cast<double>(b);  // exact: 11+11 bits
  const double cd = c;
  const double s = p + cd;
  const double bp = s - cd;
  const double e = (p - bp) + (cd - (s - bp));  // TwoSum: s + e == p + c exactly
  if (std::isinf(s) || std::isnan(s)) return static_cast<float>(s);
  return round_to_odd_float(s, e);
}

}  // namespace qt::emu

struct __half {
  uint16_t __x;
  __half() = default;
  __half(float f) : __x(qt::float_to_half_bits(f)) {}  // NOLINT: CUDA's __half converts implicitly
  // Through float rounded to odd: a plain double -> float -> half would round twice and miss values just
  // past a half midpoint; CUDA's __double2half rounds once.
  __half(double f) : __x(qt::float_to_half_bits(qt::emu::round_to_odd_float(f, 0.0))) {}
  __half(int i) : __x(qt::float_to_half_bits(static_cast<float>(i))) {}
  operator float() const { return qt::half_bits_to_float(__x); }
};

struct __nv_bfloat16 {
  uint16_t __x;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f) : __x(qt::float_to_bf16_bits(f)) {}  // NOLINT
  __nv_bfloat16(double f) : __x(qt::float_to_bf16_bits(qt::emu::round_to_odd_float(f, 0.0))) {}
  __nv_bfloat16(int i) : __x(qt::float_to_bf16_bits(static_cast<float>(i))) {}
  operator float() const { return qt::bf16_bits_to_float(__x); }
};

struct alignas(4) __half2 {
  __half x, y;
};
struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
typedef __half half;
typedef __half2 half2;
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

struct __half_raw {
  unsigned short x;
};

inline __half __ushort_as_half(unsigned short u) {
  __half h;
  h.__x = u;
  return h;
}
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) {
  __nv_bfloat16 h;
  h.__x = u;
  return h;
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }

inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __half2float(__half h) { return static_cast<float>(h); }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 h) { return static_cast<float>(h); }

inline __half __hadd(__half a, __half b) { return __half(float(a) + float(b)); }
inline __half __hsub(__half a, __half b) { return __half(float(a) - float(b)); }
inline __half __hmul(__half a, __half b) { return __half(float(a) * float(b)); }
inline __half __hdiv(__half a, __half b) { return __half(float(a) / float(b)); }
inline __half __hneg(__half a) { return __ushort_as_half(static_cast<unsigned short>(a.__x ^ 0x8000u)); }
inline __half __habs(__half a) { return __ushort_as_half(static_cast<unsigned short>(a.__x & 0x7fffu)); }
inline __half __hfma(__half a, __half b, __half c) { return __half(qt::emu::fma_exact_to_odd(a, b, c)); }
// cuda_fp16.h: a NaN input yields the other input, two NaNs the canonical NaN 0x7FFF, and +0 > -0.
inline bool qt_emu_is_nan(__half h) { return (h.__x & 0x7fffu) > 0x7c00u; }
inline __half __hmax(__half a, __half b) {
  if (qt_emu_is_nan(a)) return qt_emu_is_nan(b) ? __ushort_as_half(0x7fffu) : b;
  if (qt_emu_is_nan(b)) return a;
  if (((a.__x | b.__x) & 0x7fffu) == 0) return __ushort_as_half(static_cast<unsigned short>(a.__x & b.__x));
  return float(a) > float(b) ? a : b;
}
inline __half __hmin(__half a, __half b) {
  if (qt_emu_is_nan(a)) return qt_emu_is_nan(b) ? __ushort_as_half(0x7fffu) : b;
  if (qt_emu_is_nan(b)) return a;
  if (((a.__x | b.__x) & 0x7fffu) == 0) return __ushort_as_half(static_cast<unsigned short>(a.__x | b.__x));
  return float(a) < float(b) ? a : b;
}

inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(float(a) + float(b)); }
inline __nv_bfloat16 __hsub(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(float(a) - float(b)); }
inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(float(a) * float(b)); }
inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
  return __nv_bfloat16(qt::emu::fma_exact_to_odd(a, b, c));
}

inline __half operator+(__half a, __half b) { return __hadd(a, b); }
inline __half operator-(__half a, __half b) { return __hsub(a, b); }
inline __half operator*(__half a, __half b) { return __hmul(a, b); }
inline __half operator/(__half a, __half b) { return __hdiv(a, b); }
inline __half operator-(__half a) { return __hneg(a); }
inline __half& operator+=(__half& a, __half b) { return a = a + b; }
inline __half& operator-=(__half& a, __half b) { return a = a - b; }
inline __half& operator*=(__half& a, __half b) { return a = a * b; }
inline bool operator==(__half a, __half b) { return float(a) == float(b); }
inline bool operator!=(__half a, __half b) { return float(a) != float(b); }
inline bool operator<(__half a, __half b) { return float(a) < float(b); }
inline bool operator>(__half a, __half b) { return float(a) > float(b); }
inline bool operator<=(__half a, __half b) { return float(a) <= float(b); }
inline bool operator>=(__half a, __half b) { return float(a) >= float(b); }

inline __nv_bfloat16 operator+(__nv_bfloat16 a, __nv_bfloat16 b) { return __hadd(a, b); }
inline __nv_bfloat16 operator-(__nv_bfloat16 a, __nv_bfloat16 b) { return __hsub(a, b); }
inline __nv_bfloat16 operator*(__nv_bfloat16 a, __nv_bfloat16 b) { return __hmul(a, b); }
inline __nv_bfloat16& operator+=(__nv_bfloat16& a, __nv_bfloat16 b) { return a = a + b; }

inline __half2 __halves2half2(__half lo, __half hi) { return __half2{lo, hi}; }
inline __half2 __half2half2(__half a) { return __half2{a, a}; }
inline __half2 __floats2half2_rn(float lo, float hi) { return __half2{__half(lo), __half(hi)}; }
inline __half2 __float2half2_rn(float a) { return __half2{__half(a), __half(a)}; }
inline __half __low2half(__half2 a) { return a.x; }
inline __half __high2half(__half2 a) { return a.y; }
inline float __low2float(__half2 a) { return float(a.x); }
inline float __high2float(__half2 a) { return float(a.y); }
inline __half2 __hadd2(__half2 a, __half2 b) { return {__hadd(a.x, b.x), __hadd(a.y, b.y)}; }
inline __half2 __hsub2(__half2 a, __half2 b) { return {__hsub(a.x, b.x), __hsub(a.y, b.y)}; }
inline __half2 __hmul2(__half2 a, __half2 b) { return {__hmul(a.x, b.x), __hmul(a.y, b.y)}; }
inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) { return {__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)}; }
inline __half2 operator+(__half2 a, __half2 b) { return __hadd2(a, b); }
inline __half2 operator-(__half2 a, __half2 b) { return __hsub2(a, b); }
inline __half2 operator*(__half2 a, __half2 b) { return __hmul2(a, b); }

inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 lo, __nv_bfloat16 hi) { return {lo, hi}; }
inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
  return __nv_bfloat162{__nv_bfloat16(lo), __nv_bfloat16(hi)};
}
inline __nv_bfloat162 __float2bfloat162_rn(float a) { return __floats2bfloat162_rn(a, a); }
inline __nv_bfloat162 __hadd2(__nv_bfloat162 a, __nv_bfloat162 b) { return {__hadd(a.x, b.x), __hadd(a.y, b.y)}; }
inline __nv_bfloat162 __hmul2(__nv_bfloat162 a, __nv_bfloat162 b) { return {__hmul(a.x, b.x), __hmul(a.y, b.y)}; }
inline __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) {
  return {__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)};
}
