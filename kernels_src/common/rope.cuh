#pragma once
// NeoX rotary embedding of one pair, written once for the kernels that rotate q and k (qk_norm_rope_kv and the
// attention decode that rotates its own query and new key): pair (a, b) = (x[i], x[i + D/2]) at `position`
// becomes (a cos - b sin, b cos + a sin), angle = float(position) * inv_freq[i], inv_freq[i] = theta^(-2i/D) in
// fp32 (transformers' 1 / theta^(2i/D) to a few ulp: the exponent is formed as 2i * (1/D), the power as powf).
#include "kernels_src/common/qt_cuda.h"

namespace qt {

// cos and sin of an fp32 angle (|angle| up to a few 1e5: positions times inv_freq <= 1). cosf/sinf would carry
// a huge-argument reduction path with a local-memory stack; instead the angle is reduced to [-pi, pi] with 2 pi
// split in three fp32 parts (each fmaf rounds once, so the error stays ~|k| * 2^-24 * |part 3|), and the
// hardware __cosf/__sinf (absolute error ~2^-21 on that interval) finish it.
__device__ __forceinline__ void rope_cos_sin(float angle, float& c, float& s) {
  constexpr float kInvTwoPi = 0.15915493667125702f;
  constexpr float kTwoPi1 = 6.2831854820251465f;        // fp32(2 pi)
  constexpr float kTwoPi2 = -1.7484555314695172e-07f;   // fp32(2 pi - part 1)
  constexpr float kTwoPi3 = -6.8604980400235275e-15f;   // fp32(2 pi - part 1 - part 2)
  const float k = rintf(angle * kInvTwoPi);
  float r = fmaf(-k, kTwoPi1, angle);
  r = fmaf(-k, kTwoPi2, r);
  r = fmaf(-k, kTwoPi3, r);
  c = __cosf(r);
  s = __sinf(r);
}

// The rotated pair of element i (< D/2) at `position`; inv_d = 1 / D.
__device__ __forceinline__ void rope_rotate(float a, float b, int i, int position, float inv_d, float theta, float& lo,
                                            float& hi) {
  const float inv_freq = powf(theta, -(float)(2 * i) * inv_d);
  const float angle = (float)position * inv_freq;
  float cs, sn;
  rope_cos_sin(angle, cs, sn);
  lo = a * cs - b * sn;
  hi = b * cs + a * sn;
}

// Pair i of a head normalized (x * inv_rms * w, in that order) and rotated: qk_norm_rope_kv's products, which
// the attention decode that rotates its own q and k must repeat to match it.
__device__ __forceinline__ void rope_norm_rotate(float a, float b, float inv_rms, float wa, float wb, int i, int position,
                                                 float inv_d, float theta, float& lo, float& hi) {
  rope_rotate(a * inv_rms * wa, b * inv_rms * wb, i, position, inv_d, theta, lo, hi);
}

}  // namespace qt
