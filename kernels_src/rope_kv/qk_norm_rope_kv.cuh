#pragma once
// Per-head q/k RMSNorm, NeoX RoPE and the KV-cache write for tokens pos0 .. pos0+M-1 (pos0 = pos[0]).
//
// Work items: for every token, its H query heads and KVH key heads (a key item also copies the token's value
// head into v_cache). A group of LANES consecutive lanes takes one item; lane l of a group owns elements
// i = (c * LANES + l) * VEC .. +VEC-1 of the first half of the head and the same offsets + D/2 of the second
// half (the NeoX pairs), c < CH passes, so the whole head lives in registers between the sum of squares and
// the rotation. Loads and stores are VEC halves wide (D/2 % VEC == 0 keeps both halves aligned).
//
// Math in fp32 on the fp16 inputs, one fp16 rounding per output: x * inv_rms * w, then
//   out[i] = a cos - b sin, out[i + D/2] = b cos + a sin,  a = normed[i], b = normed[i + D/2],
// angle = float(pos) * inv_freq[i], inv_freq[i] = theta^(-2i/D) in fp32 (transformers' 1 / theta^(2i/D) to a few
// ulp: the exponent is formed as 2i * (1/D), the power as powf).
// Rows at positions >= C are not written (the runtime never asks for them; this keeps a bad pos in bounds).
#include "kernels_src/common/qt_cuda.h"
#include "kernels_src/common/rope.cuh"

namespace rope_kv {

template <int VEC>
__device__ __forceinline__ void load_f16(const __half* p, float (&out)[VEC]) {
  static_assert(VEC == 2 || VEC == 4 || VEC == 8, "vector width");
  uint32_t w[VEC / 2];
  if constexpr (VEC == 8) {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  } else if constexpr (VEC == 4) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    w[0] = v.x, w[1] = v.y;
  } else {
    w[0] = *reinterpret_cast<const uint32_t*>(p);
  }
#pragma unroll
  for (int i = 0; i < VEC / 2; ++i) {
    out[2 * i] = __half2float(__ushort_as_half((unsigned short)(w[i] & 0xffffu)));
    out[2 * i + 1] = __half2float(__ushort_as_half((unsigned short)(w[i] >> 16)));
  }
}

template <int VEC>
__device__ __forceinline__ void store_f16(__half* p, const float (&in)[VEC]) {
  uint32_t w[VEC / 2];
#pragma unroll
  for (int i = 0; i < VEC / 2; ++i) w[i] = qt::cvt_f16x2(in[2 * i], in[2 * i + 1]);
  if constexpr (VEC == 8) {
    *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  } else if constexpr (VEC == 4) {
    *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
  } else {
    *reinterpret_cast<uint32_t*>(p) = w[0];
  }
}

// Copies VEC halves unchanged.
template <int VEC>
__device__ __forceinline__ void copy_f16(__half* dst, const __half* src) {
  if constexpr (VEC == 8) {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
  } else if constexpr (VEC == 4) {
    *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src);
  } else {
    *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<const uint32_t*>(src);
  }
}

}  // namespace rope_kv

template <int WARPS, int LANES, int VEC>
__global__ void __launch_bounds__(WARPS * 32)
    qk_norm_rope_kv_kernel(const __half* q, const __half* k, const __half* v, const float* q_norm,
                           const float* k_norm, const int* pos, __half* q_out, __half* k_cache, __half* v_cache,
                           int M, int H, int KVH, int D, int C, float eps, float theta) {
  qt::grid_dependency_entry();
  constexpr int CH = 128 / (LANES * VEC);  // passes over half a head of up to 256 elements
  static_assert(CH >= 1 && 32 % LANES == 0, "lane groups and passes");
  const int lane_g = threadIdx.x % LANES;
  const int items = M * (H + KVH);
  const int item_raw = (blockIdx.x * (WARPS * 32) + threadIdx.x) / LANES;
  // Lanes past the last item still take part in the group shuffles (on a copy of the last item) and store nothing.
  const bool live = item_raw < items;
  const int item = live ? item_raw : items - 1;
  const int m = item / (H + KVH), j = item % (H + KVH);
  const bool is_q = j < H;
  const int head = is_q ? j : j - H;
  const int half = D / 2;
  const __half* src = is_q ? q + (int64_t)m * H * D + head * D : k + (int64_t)m * KVH * D + head * D;
  const float* w = is_q ? q_norm : k_norm;

  float lo[CH][VEC], hi[CH][VEC];
  float ss = 0.0f;
#pragma unroll
  for (int c = 0; c < CH; ++c) {
    const int i = (c * LANES + lane_g) * VEC;
    if (i < half) {
      rope_kv::load_f16<VEC>(src + i, lo[c]);
      rope_kv::load_f16<VEC>(src + half + i, hi[c]);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) lo[c][e] = hi[c][e] = 0.0f;
    }
#pragma unroll
    for (int e = 0; e < VEC; ++e) ss += lo[c][e] * lo[c][e] + hi[c][e] * hi[c][e];
  }
#pragma unroll
  for (int o = LANES / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  // No IEEE divisions here: their slow path is a called subroutine whose register saves spill. The reciprocal
  // multiply and rsqrtf are within 2 ulp.
  const float inv_d = 1.0f / (float)D;
  const float inv_rms = rsqrtf(ss * inv_d + eps);

  const int position = *pos + m;
  const bool in_cache = position >= 0 && position < C;
  const int64_t row = (int64_t)position * KVH * D + head * D;
#pragma unroll
  for (int c = 0; c < CH; ++c) {
    const int i = (c * LANES + lane_g) * VEC;
    if (!live || i >= half) continue;
    float out_lo[VEC], out_hi[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      qt::rope_norm_rotate(lo[c][e], hi[c][e], inv_rms, w[i + e], w[half + i + e], i + e, position, inv_d, theta,
                           out_lo[e], out_hi[e]);
    }
    if (is_q) {
      __half* dst = q_out + (int64_t)m * H * D + head * D;
      rope_kv::store_f16<VEC>(dst + i, out_lo);
      rope_kv::store_f16<VEC>(dst + half + i, out_hi);
    } else if (in_cache) {
      rope_kv::store_f16<VEC>(k_cache + row + i, out_lo);
      rope_kv::store_f16<VEC>(k_cache + row + half + i, out_hi);
      const __half* vsrc = v + (int64_t)m * KVH * D + head * D;
      rope_kv::copy_f16<VEC>(v_cache + row + i, vsrc + i);
      rope_kv::copy_f16<VEC>(v_cache + row + half + i, vsrc + half + i);
    }
  }
}
