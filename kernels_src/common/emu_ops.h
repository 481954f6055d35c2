#pragma once
// Host reference semantics of the PTX instructions qtune's kernels use, written from the PTX ISA
// (facts as the CUDA C++ Programming Guide and PTX ISA state them). Pure functions: the emulator's wrappers,
// its warp collectives and the tests all use these, so each is checked once against the ISA tables.
#include <bit>
#include <cstdint>

#include "common/half.h"
#include "kernels_src/common/emu_half.h"
#include "kernels_src/common/wgmma_desc.h"

namespace qt::emu {

// lop3.b32: bit i of d is bit ((a_i << 2) | (b_i << 1) | c_i) of the LUT (a is the MSB of the index, so
// F(0xF0, 0xCC, 0xAA) == LUT).
inline uint32_t lop3_ref(uint32_t a, uint32_t b, uint32_t c, uint32_t lut) {
  uint32_t d = 0;
  for (uint32_t k = 0; k < 8; ++k) {
    if ((lut >> k) & 1u) d |= ((k & 4) ? a : ~a) & ((k & 2) ? b : ~b) & ((k & 1) ? c : ~c);
  }
  return d;
}

// prmt.b32 (default mode): the 8 source bytes are {b, a} (a = bytes 0-3); selector nibble i picks byte
// (nibble & 7) for result byte i, and with bit 3 set replicates that byte's sign bit instead.
inline uint32_t prmt_ref(uint32_t a, uint32_t b, uint32_t selector) {
  const uint64_t bytes = (uint64_t{b} << 32) | a;
  uint32_t d = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t s = (selector >> (4 * i)) & 0xfu;
    uint32_t byte = static_cast<uint32_t>(bytes >> (8 * (s & 7u))) & 0xffu;
    if (s & 8u) byte = (byte & 0x80u) ? 0xffu : 0u;
    d |= byte << (8 * i);
  }
  return d;
}

inline uint32_t bit_reverse32(uint32_t x) {
  uint32_t r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}

// ---- packed half arithmetic (each lane rounded once, round-to-nearest-even) ----------------------------
inline uint16_t lo16(uint32_t v) { return static_cast<uint16_t>(v & 0xffffu); }
inline uint16_t hi16(uint32_t v) { return static_cast<uint16_t>(v >> 16); }
inline uint32_t pack16(uint16_t lo, uint16_t hi) { return uint32_t{lo} | (uint32_t{hi} << 16); }
inline float hf(uint16_t h) { return half_bits_to_float(h); }
inline uint16_t fh(float f) { return float_to_half_bits(f); }

inline uint32_t f16x2_add(uint32_t a, uint32_t b) {
  return pack16(fh(hf(lo16(a)) + hf(lo16(b))), fh(hf(hi16(a)) + hf(hi16(b))));
}
inline uint32_t f16x2_sub(uint32_t a, uint32_t b) {
  return pack16(fh(hf(lo16(a)) - hf(lo16(b))), fh(hf(hi16(a)) - hf(hi16(b))));
}
inline uint32_t f16x2_mul(uint32_t a, uint32_t b) {
  return pack16(fh(hf(lo16(a)) * hf(lo16(b))), fh(hf(hi16(a)) * hf(hi16(b))));
}
inline uint32_t f16x2_fma(uint32_t a, uint32_t b, uint32_t c) {
  return pack16(fh(fma_exact_to_odd(hf(lo16(a)), hf(lo16(b)), hf(lo16(c)))),
                fh(fma_exact_to_odd(hf(hi16(a)), hf(hi16(b)), hf(hi16(c)))));
}
inline uint32_t bf16x2_fma(uint32_t a, uint32_t b, uint32_t c) {
  auto bf = [](uint16_t v) { return bf16_bits_to_float(v); };
  return pack16(float_to_bf16_bits(fma_exact_to_odd(bf(lo16(a)), bf(lo16(b)), bf(lo16(c)))),
                float_to_bf16_bits(fma_exact_to_odd(bf(hi16(a)), bf(hi16(b)), bf(hi16(c)))));
}
inline uint32_t pack_f16x2(float lo, float hi) { return pack16(fh(lo), fh(hi)); }
inline uint32_t pack_bf16x2(float lo, float hi) { return pack16(float_to_bf16_bits(lo), float_to_bf16_bits(hi)); }

// ---- shfl.sync lane selection (PTX "shfl.sync"): returns the source lane, or -1 when out of range ------
// (then the thread receives its own value).
inline int shfl_source_lane(int mode /*0 up, 1 down, 2 bfly, 3 idx*/, uint32_t lane, uint32_t b, uint32_t c) {
  const uint32_t bval = b & 0x1fu, cval = c & 0x1fu, segmask = (c >> 8) & 0x1fu;
  const uint32_t max_lane = (lane & segmask) | (cval & ~segmask);
  const uint32_t min_lane = lane & segmask;
  int32_t j = 0;
  bool valid = false;
  switch (mode) {
    case 0:
      j = static_cast<int32_t>(lane) - static_cast<int32_t>(bval);
      valid = j >= static_cast<int32_t>(max_lane);
      break;
    case 1:
      j = static_cast<int32_t>(lane + bval);
      valid = j <= static_cast<int32_t>(max_lane);
      break;
    case 2:
      j = static_cast<int32_t>(lane ^ bval);
      valid = j <= static_cast<int32_t>(max_lane);
      break;
    default:
      j = static_cast<int32_t>(min_lane | (bval & ~segmask));
      valid = j <= static_cast<int32_t>(max_lane);
      break;
  }
  return valid ? j : -1;
}

// ---- mma.m16n8k16 fragment maps (PTX "Matrix Fragments for mma.m16n8k16 with floating point type") ----
// g = lane >> 2, t = lane % 4. A element i (0..7) of a lane; B element i (0..3); C/D element i (0..3).
inline int mma_a_row(int lane, int i) { return (lane >> 2) + (((i >> 1) & 1) ? 8 : 0); }
inline int mma_a_col(int lane, int i) { return 2 * (lane & 3) + (i & 1) + (i >= 4 ? 8 : 0); }
inline int mma_b_row(int lane, int i) { return 2 * (lane & 3) + (i & 1) + (i >= 2 ? 8 : 0); }
inline int mma_b_col(int lane, int /*i*/) { return lane >> 2; }
inline int mma_c_row(int lane, int i) { return (lane >> 2) + (i >= 2 ? 8 : 0); }
inline int mma_c_col(int lane, int i) { return 2 * (lane & 3) + (i & 1); }

// ---- mma.m16n8k32 with .s8 operands (PTX "Matrix Fragments for mma.m16n8k32"): A element i (0..15) sits
// in byte i % 4 of register i / 4, B element i (0..7) in byte i % 4 of register i / 4; C/D as above.
inline int mma_s8_a_row(int lane, int i) { return (lane >> 2) + (((i >> 2) & 1) ? 8 : 0); }
inline int mma_s8_a_col(int lane, int i) { return 4 * (lane & 3) + (i & 3) + (i >= 8 ? 16 : 0); }
inline int mma_s8_b_row(int lane, int i) { return 4 * (lane & 3) + (i & 3) + (i >= 4 ? 16 : 0); }
inline int mma_s8_b_col(int lane, int /*i*/) { return lane >> 2; }

// ---- ldmatrix: which row/column of matrix m lane l receives in its low (h = 0) / high (h = 1) half -----
// Non-transposed: row l>>2, column 2(l%4)+h. Transposed: row 2(l%4)+h, column l>>2.
inline int ldmatrix_row(int lane, int h, bool trans) { return trans ? 2 * (lane & 3) + h : lane >> 2; }
inline int ldmatrix_col(int lane, int h, bool trans) { return trans ? lane >> 2 : 2 * (lane & 3) + h; }

// ---- wgmma (PTX "Asynchronous Warpgroup Level Matrix Multiply-Accumulate") ---------------------------------
// Fragments of m64nNk16, thread t of the warpgroup (warp w = t / 32, lane = t % 32): each warp owns 16 rows,
// laid out as the mma.m16n8k16 fragments above. A (register form, 4 registers = 8 halves): element i.
inline int wgmma_a_row(int t, int i) { return 16 * (t / 32) + mma_a_row(t % 32, i); }
inline int wgmma_a_col(int t, int i) { return mma_a_col(t % 32, i); }
// D: float i (0 .. N/2-1): column block i / 4 of 8 columns, within it as mma's C fragment.
inline int wgmma_d_row(int t, int i) { return 16 * (t / 32) + mma_c_row(t % 32, i % 4); }
inline int wgmma_d_col(int t, int i) { return 8 * (i / 4) + mma_c_col(t % 32, i % 4); }

// The emulator's shared window spans 275 KiB (static at 0, dynamic at 48 KiB), past the 18 address bits a
// descriptor holds: its descriptors carry address bits 18-19 in the reserved bits 14-15, which are 0 for
// every address of a GPU's (at most 228 KiB) shared memory.
constexpr int kEmuDescHighShift = 14;
inline uint64_t emu_wgmma_desc(uint32_t smem_addr, uint32_t lbo, uint32_t sbo, int swizzle) {
  return wgmma_desc_encode(smem_addr, lbo, sbo, swizzle) | (uint64_t{(smem_addr >> 18) & 3u} << kEmuDescHighShift);
}

struct WgmmaDescFields {
  uint32_t start, lbo, sbo, base_offset;
  int swizzle;
};
inline WgmmaDescFields wgmma_desc_decode(uint64_t d) {
  using namespace wgmma_desc_field;
  WgmmaDescFields f;
  f.start = static_cast<uint32_t>((d >> kStartShift) & 0xFFFFu) << 4;  // with the emulator's bits 18-19
  f.lbo = static_cast<uint32_t>((d >> kLboShift) & kFieldMask) << 4;
  f.sbo = static_cast<uint32_t>((d >> kSboShift) & kFieldMask) << 4;
  f.base_offset = static_cast<uint32_t>((d >> kBaseOffsetShift) & 7u);
  f.swizzle = static_cast<int>(d >> kSwizzleShift);
  return f;
}

// Shared address of element (mn, k) (mn: row of A, column of B; k < 16) of a 16-bit operand read through a
// descriptor, in the canonical layouts of PTX "Shared Memory Matrix Layout" (as CuTe's make_gmma_desc
// spells them, in 16-byte units T): K-major (transpose 0)
//   none:    ((8,m),(T,2)):((1T,SBO),(1,LBO))       swizzled: ((8,m),(T,2)):((W,SBO),(1,T))
// MN-major (transpose 1)
//   none:    ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))   swizzled: ((T,W,m),(8,k)):((1,T,LBO),(W T,SBO))
// with W the swizzle row in 16-byte units (2, 4, 8 for 32B, 64B, 128B), then the swizzle: address bits
// [4, 4 + log2 W) XOR bits [7, 7 + log2 W) (CuTe Swizzle<log2 W, 4, 3> on the byte address).
inline uint32_t wgmma_element_address(const WgmmaDescFields& f, bool mn_major, uint32_t mn, uint32_t k) {
  const uint32_t row_bytes = wgmma_swizzle_row_bytes(f.swizzle);
  const bool swizzled = f.swizzle != kSwizzleNone;
  uint32_t off;
  if (!mn_major) {
    const uint32_t row = mn % 8, group = mn / 8, chunk = k / 8;
    off = group * f.sbo + 2 * (k % 8) + (swizzled ? row * row_bytes + chunk * 16 : row * 16 + chunk * f.lbo);
  } else {
    const uint32_t chunk = mn / 8, krow = k % 8, kgroup = k / 8, chunks_per_row = row_bytes / 16;
    off = 2 * (mn % 8) + (swizzled ? (chunk % chunks_per_row) * 16 + (chunk / chunks_per_row) * f.lbo +
                                         krow * row_bytes + kgroup * f.sbo
                                   : chunk * f.sbo + krow * 16 + kgroup * f.lbo);
  }
  const uint32_t a = f.start + off;
  return a ^ ((a >> 3) & (row_bytes - 16));
}

}  // namespace qt::emu
