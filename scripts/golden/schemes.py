"""Quantization schemes of the goldens: what each file format does to each tensor.

scheme_weights() returns the weights a file of that scheme holds, widened back to float32 (the
"dequantized model" transformers then runs), plus a description of the quantization for the manifest.
"""
import numpy as np

import quant
import tiny_models as tm
from qwen3c_writer import q8_group

AWQ_GROUP = 32
EXPERT_GROUP = 32

DENSE_SCHEMES = ("f32", "ajc1-q8_0", "ak48-awq")
MOE_SCHEMES = ("f32", "moe3-q8_0", "moe3-int8-sym", "moe3-int8-asym", "moe3-awq")
PROJ_SUFFIXES = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
                 "gate_proj.weight", "up_proj.weight", "down_proj.weight")


def schemes_for(spec):
    return MOE_SCHEMES if tm.is_moe(spec) else DENSE_SCHEMES


def _q8(w, g):
    q, s = quant.q8_0_quantize(w, g)
    return quant.q8_0_dequantize(q, s, w.shape, g)


def _expert(w, kind, g):
    if kind == "q8_0":
        return _q8(w, g)
    if kind in ("int8-sym", "int8-asym"):
        u8, s, z = quant.int8_gw_quantize(w, g, asym=(kind == "int8-asym"))
        return quant.int8_gw_dequantize(u8, s, z, g)
    if kind == "awq":
        q, z, s = quant.awq_quantize(w, g)
        return quant.awq_dequantize_int(q, z, s, g)
    raise ValueError(kind)


def _is_matrix(name):
    return not name.endswith("norm.weight")


def scheme_weights(spec, w, scheme):
    """Returns (float32 weights dict, description dict)."""
    cfg = tm.config_json(spec)
    if scheme == "f32":
        return dict(w), {"description": "no quantization: the float32 checkpoint as is"}
    if scheme == "ajc1-q8_0":
        g = q8_group(cfg)
        out = {k: (_q8(v, g) if _is_matrix(k) else v) for k, v in w.items()}
        return out, {"description": "ajc1: every matrix (embedding, projections, lm_head when untied) Q8_0 "
                                    "with qwen3.c's group; norms float32",
                     "weight_type": "Q8_0", "group_size": g}
    if scheme == "ak48-awq":
        out = {}
        for k, v in w.items():
            if k.endswith(PROJ_SUFFIXES):
                q, z, s = quant.awq_quantize(v, AWQ_GROUP)
                out[k] = quant.awq_dequantize_int(q, z, s, AWQ_GROUP)
            else:
                out[k] = quant.fp16_round(v)
        return out, {"description": "ak48: the 7 projections AWQ_INT4 (round-to-nearest with zero point) "
                                    f"group {AWQ_GROUP}; norms, q/k norms, embedding and lm_head rounded to fp16",
                     "weight_type": "AWQ_INT4", "group_size": AWQ_GROUP}
    if scheme.startswith("moe3-"):
        kind = scheme[len("moe3-"):]
        g = q8_group(cfg)
        eg = g if kind == "q8_0" else EXPERT_GROUP
        out = {}
        for k, v in w.items():
            if not _is_matrix(k):
                out[k] = v
            elif ".mlp.experts." in k:
                out[k] = _expert(v, kind, eg)
            else:
                out[k] = _q8(v, g)
        names = {"q8_0": "Q8_0", "int8-sym": "INT8_GW_SYM", "int8-asym": "INT8_GW_ASYM", "awq": "AWQ_INT4"}
        return out, {"description": f"moe3: experts {names[kind]} group {eg}; embedding, attention, router "
                                    f"and lm_head Q8_0 group {g}; norms float32",
                     "weight_type": "Q8_0", "group_size": g,
                     "expert_type": names[kind], "expert_group_size": eg}
    raise ValueError(f"unknown scheme {scheme}")


def awq_checkpoint(spec, w):
    """An AutoAWQ GEMM checkpoint of a dense model: (state dict, config.json)."""
    if tm.is_moe(spec):
        raise ValueError("AutoAWQ checkpoints are made for dense models only")
    out = {}
    for k, v in w.items():
        if k.endswith(PROJ_SUFFIXES):
            base = k[: -len(".weight")]
            q, z, s = quant.awq_quantize(v, AWQ_GROUP)
            out[base + ".qweight"] = quant.awq_pack(q)
            out[base + ".qzeros"] = quant.awq_pack(z)
            out[base + ".scales"] = s
        else:
            out[k] = v.astype(np.float16)
    cfg = tm.config_json(spec)
    cfg["torch_dtype"] = "float16"
    cfg["quantization_config"] = {"bits": 4, "group_size": AWQ_GROUP, "modules_to_not_convert": None,
                                  "quant_method": "awq", "version": "gemm", "zero_point": True}
    return out, cfg
