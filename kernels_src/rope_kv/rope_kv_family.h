#pragma once
// qk_norm_rope_kv (op "qk_norm_rope_kv"): for tokens at positions pos0 .. pos0+M-1 (pos0 read from the
// device buffer "pos"), RMSNorm of every q and k head over its head_dim (weights "q_norm", "k_norm", scalar
// "eps"), NeoX RoPE (scalar "theta"), q written to "q_out", rotated k and raw v written to rows pos0.. of the
// fp16 KV cache ("k_cache", "v_cache"). Dims {M, H, KVH, D, C, P}: tokens, q heads, kv heads, head dim, cache
// capacity in tokens, and the pos0 the tests put in "pos".
#include "kernels_src/registry/family.h"

namespace qt::kernels::rope_kv {

const KernelFamily& qk_norm_rope_kv_family();

}  // namespace qt::kernels::rope_kv
