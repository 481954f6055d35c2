#pragma once
// CPU reference of qk_norm_rope_kv: per-head RMSNorm (statistics over the fp16 inputs, in double), NeoX RoPE
// with transformers' fp32 angle (inv_freq = 1 / theta^(2i/D) in fp32, angle = float(pos) * inv_freq), cos and
// sin of that angle in double, and the KV-cache rows pos0 .. pos0+M-1 replaced by the rotated k and the
// unchanged v.
#include <cstdint>
#include <vector>

namespace qt::kernels::rope_kv {

struct RopeProblem {
  int64_t m = 0, heads = 0, kv_heads = 0, head_dim = 0, capacity = 0, pos0 = 0;
  float eps = 1e-6f, theta = 1e6f;
};

struct RopeResult {
  std::vector<double> q_out;    // [M][H*D]
  std::vector<double> k_cache;  // [C][KVH*D], the whole cache after the write
  std::vector<double> v_cache;  // [C][KVH*D]
  double max_pair = 0;          // largest |a| + |b| over the rotated (normed) pairs: scales the angle error
};

// The fp32 angle of pair i at `position`, computed as transformers does.
float rope_angle(int64_t position, int64_t i, int64_t head_dim, float theta);

// q, k, v: fp16 bits; norm weights fp32; caches: fp16 bits before the call.
RopeResult reference_qk_norm_rope_kv(const RopeProblem& p, const std::vector<uint16_t>& q,
                                     const std::vector<uint16_t>& k, const std::vector<uint16_t>& v,
                                     const std::vector<float>& q_norm, const std::vector<float>& k_norm,
                                     const std::vector<uint16_t>& k_cache, const std::vector<uint16_t>& v_cache);

}  // namespace qt::kernels::rope_kv
