"""Independent writer of the qwen3.c-family layouts (ajc1, moe3, ak48), written from
shared/reference/formats.md and the team brief's header extensions, not from qtune's C++.

Inputs are canonical Hugging Face state dicts (numpy arrays keyed by on-disk HF name):
  * ajc1 / moe3: float32 weights, quantized here with quant.py's rules;
  * ak48: an AutoAWQ checkpoint (int32 qweight/qzeros, fp16 scales and fp16 plain tensors), copied as is.

Header extensions (zero padding means default):
  ajc1, moe3: f32 rope_theta at 0x40, f32 rms_norm_eps at 0x44 (each written only when it differs from
              the defaults 1e6 / 1e-6); moe3: i32 expert_type at 0x48 (0 Q8_0, 1 INT8_GW_SYM,
              2 INT8_GW_ASYM, 3 AWQ_INT4), i32 expert_group_size at 0x4C (written only when it differs
              from the header group_size).
  ak48:       f32 rope_theta at 45, f32 rms_norm_eps at 49 (same rule).
"""
import struct

import numpy as np

import quant

F32 = np.float32
DEFAULT_THETA = 1e6
DEFAULT_EPS = 1e-6
AJC1_MAGIC = 0x616A6331
MOE3_MAGIC = 0x6D6F6533
AK48_MAGIC = 0x616B3438
EXPERT_TYPES = {"q8_0": 0, "int8-sym": 1, "int8-asym": 2, "awq": 3}
PROJ = (("wq", "self_attn.q_proj"), ("wk", "self_attn.k_proj"), ("wv", "self_attn.v_proj"),
        ("wo", "self_attn.o_proj"), ("w1", "mlp.gate_proj"), ("w2", "mlp.down_proj"),
        ("w3", "mlp.up_proj"))


def _ext_float(value, default):
    """The f32 stored in an extension slot: 0 when the value is the default (qwen3.c files)."""
    return 0.0 if F32(value) == F32(default) else float(F32(value))


class _Out:
    def __init__(self):
        self.parts = []

    def raw(self, b):
        self.parts.append(bytes(b))

    def arr(self, a, dtype):
        self.parts.append(np.ascontiguousarray(a, dtype=dtype).astype(np.dtype(dtype).newbyteorder("<"))
                          .tobytes())

    def q8(self, w, group):
        q, s = quant.q8_0_quantize(w, group)
        self.arr(q, np.int8)      # all int8 of the tensor ...
        self.arr(s, np.float32)   # ... then all its scales

    def data(self):
        return b"".join(self.parts)


def _ajc1_like_header(magic, cfg, hidden_dim, shared, group):
    h = bytearray(256)
    struct.pack_into("<I11i", h, 0, magic, 1, cfg["hidden_size"], hidden_dim, cfg["num_hidden_layers"],
                     cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["vocab_size"],
                     cfg["max_position_embeddings"], cfg["head_dim"], int(shared), group)
    struct.pack_into("<ff", h, 0x40, _ext_float(cfg["rope_theta"], DEFAULT_THETA),
                     _ext_float(cfg["rms_norm_eps"], DEFAULT_EPS))
    return h


def _shared(w):
    return "lm_head.weight" not in w or np.array_equal(w["lm_head.weight"], w["model.embed_tokens.weight"])


def _norms_fp32(out, w, n_layers):
    for key in ("input_layernorm", "post_attention_layernorm"):
        for layer in range(n_layers):
            out.arr(w[f"model.layers.{layer}.{key}.weight"], np.float32)
    out.arr(w["model.norm.weight"], np.float32)
    for key in ("self_attn.q_norm", "self_attn.k_norm"):
        for layer in range(n_layers):
            out.arr(w[f"model.layers.{layer}.{key}.weight"], np.float32)


def q8_group(cfg):
    """qwen3.c's group for a config: from dim, checked against every in-feature count."""
    inner = cfg["moe_intermediate_size"] if "num_experts" in cfg else cfg["intermediate_size"]
    return quant.qwen3c_group_size(cfg["hidden_size"], [cfg["hidden_size"],
                                                       cfg["num_attention_heads"] * cfg["head_dim"], inner])


def ajc1_bytes(cfg, w):
    """qwen3.c export: header, fp32 norms, Q8_0 tensors grouped by type across layers."""
    n_layers, group, shared = cfg["num_hidden_layers"], q8_group(cfg), _shared(w)
    out = _Out()
    out.raw(_ajc1_like_header(AJC1_MAGIC, cfg, cfg["intermediate_size"], shared, group))
    _norms_fp32(out, w, n_layers)
    out.q8(w["model.embed_tokens.weight"], group)
    for _, hf in PROJ:
        for layer in range(n_layers):
            out.q8(w[f"model.layers.{layer}.{hf}.weight"], group)
    if not shared:
        out.q8(w["lm_head.weight"], group)
    return out.data()


def _expert_block(out, mats, kind, group):
    """One projection of all E experts of a layer, stored as the moe3 expert type says."""
    if kind == "q8_0":
        for m in mats:
            out.q8(m, group)
        return
    if kind in ("int8-sym", "int8-asym"):
        qs = [quant.int8_gw_quantize(m, group, asym=(kind == "int8-asym")) for m in mats]
        out.arr(np.stack([q[0] for q in qs]), np.uint8)        # [E][K][N], +128 bias
        out.arr(np.stack([q[1] for q in qs]), np.float16)      # [E][K/G][N]
        if kind == "int8-asym":
            out.arr(np.stack([q[2] for q in qs]), np.float16)  # [E][K/G][N]
        return
    if kind == "awq":
        qs = [quant.awq_quantize(m, group) for m in mats]
        out.arr(np.stack([quant.awq_pack(q[0]) for q in qs]), np.int32)  # qweight [E][K][N/8]
        out.arr(np.stack([quant.awq_pack(q[1]) for q in qs]), np.int32)  # qzeros [E][K/G][N/8]
        out.arr(np.stack([q[2] for q in qs]), np.float16)                # scales [E][K/G][N]
        return
    raise ValueError(f"unknown expert type {kind}")


def moe3_bytes(cfg, w, expert_kind="q8_0", expert_group=None):
    """moe3: ajc1-style header + MoE fields, fp32 norms, embedding, then per layer wq wk wv wo router
    experts_w1 (gate) experts_w2 (down) experts_w3 (up), then wcls when not shared."""
    n_layers, n_exp, group, shared = cfg["num_hidden_layers"], cfg["num_experts"], q8_group(cfg), _shared(w)
    eg = group if expert_kind == "q8_0" or expert_group is None else expert_group
    if expert_kind == "q8_0" and eg != group:
        raise ValueError("Q8_0 experts use the header group size")
    h = _ajc1_like_header(MOE3_MAGIC, cfg, cfg["moe_intermediate_size"], shared, group)
    struct.pack_into("<3i", h, 0x30, n_exp, cfg["num_experts_per_tok"], int(cfg["norm_topk_prob"]))
    struct.pack_into("<2i", h, 0x48, EXPERT_TYPES[expert_kind], 0 if eg == group else eg)
    out = _Out()
    out.raw(h)
    _norms_fp32(out, w, n_layers)
    out.q8(w["model.embed_tokens.weight"], group)
    for layer in range(n_layers):
        p = f"model.layers.{layer}"
        for hf in ("q_proj", "k_proj", "v_proj", "o_proj"):
            out.q8(w[f"{p}.self_attn.{hf}.weight"], group)
        out.q8(w[f"{p}.mlp.gate.weight"], group)  # router, HF [E][dim]
        for proj in ("gate_proj", "down_proj", "up_proj"):
            _expert_block(out, [w[f"{p}.mlp.experts.{e}.{proj}.weight"] for e in range(n_exp)],
                          expert_kind, eg)
    if not shared:
        out.q8(w["lm_head.weight"], group)
    return out.data()


def ak48_bytes(cfg, awq):
    """ak48 (OrinMLLM's Qwen3 AWQ export) from an AutoAWQ checkpoint dict; tensors copied unchanged."""
    n_layers = cfg["num_hidden_layers"]
    group = cfg["quantization_config"]["group_size"]
    shared = "lm_head.weight" not in awq or np.array_equal(awq["lm_head.weight"],
                                                            awq["model.embed_tokens.weight"])
    h = bytearray(256)
    struct.pack_into("<I8i", h, 0, AK48_MAGIC, 5, cfg["hidden_size"], cfg["intermediate_size"], n_layers,
                     cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["vocab_size"],
                     cfg["max_position_embeddings"])
    struct.pack_into("<Biiff", h, 36, int(shared), cfg["head_dim"], group,
                     _ext_float(cfg["rope_theta"], DEFAULT_THETA),
                     _ext_float(cfg["rms_norm_eps"], DEFAULT_EPS))
    out = _Out()
    out.raw(h)

    def f16(name):
        a = awq[name]
        if a.dtype != np.float16:
            raise ValueError(f"{name} must be fp16 in an AutoAWQ checkpoint")
        out.arr(a, np.float16)

    for key in ("input_layernorm", "post_attention_layernorm"):
        for layer in range(n_layers):
            f16(f"model.layers.{layer}.{key}.weight")
    f16("model.norm.weight")
    f16("model.embed_tokens.weight")
    for _, hf in PROJ:
        for layer in range(n_layers):
            p = f"model.layers.{layer}.{hf}"
            out.arr(awq[f"{p}.qweight"], np.int32)
            out.arr(awq[f"{p}.qzeros"], np.int32)
            out.arr(awq[f"{p}.scales"], np.float16)
    if not shared:
        f16("lm_head.weight")
    for key in ("self_attn.q_norm", "self_attn.k_norm"):
        for layer in range(n_layers):
            f16(f"model.layers.{layer}.{key}.weight")
    return out.data()
