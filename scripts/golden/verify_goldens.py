#!/usr/bin/env python3
"""Checks tests/golden/ by paths independent of the generator:

 1. Every file in files/ is parsed by the reader below (its own byte offsets and dequantization, not
    quant.py or qwen3c_writer.py), its header is checked against the model's config.json and its size
    against the size the header implies; the dequantized weights run in transformers must reproduce the
    committed logits of the file's scheme.
 2. The AutoAWQ checkpoints, unpacked and dequantized by AutoAWQ's own packing_utils (when autoawq is
    installed), equal the weights behind the ak48-awq goldens; AutoAWQ's WQLinear_GEMM.from_linear packs
    the reference layer and every projection to the committed qweight/qzeros.
 3. Manifest bookkeeping: hashes, shapes and top-1 tokens match the files.

Usage: .venv-golden/bin/python scripts/golden/verify_goldens.py [--golden tests/golden]
"""
import argparse
import hashlib
import json
import os
import struct
import sys
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tiny_models as tm  # noqa: E402  (only to build and run the transformers model)

REPO = os.path.dirname(os.path.dirname(HERE))
F32 = np.float32
NIBBLE_OF = (0, 4, 1, 5, 2, 6, 3, 7)


class Reader:
    def __init__(self, data):
        self.d = data
        self.pos = 0

    def take(self, dtype, count):
        dt = np.dtype(dtype).newbyteorder("<")
        n = dt.itemsize * count
        if self.pos + n > len(self.d):
            raise ValueError("file ends early")
        a = np.frombuffer(self.d, dtype=dt, count=count, offset=self.pos)
        self.pos += n
        return a.astype(dt.newbyteorder("="))

    def q8(self, rows, cols, group):
        q = self.take(np.int8, rows * cols).astype(F32)
        s = self.take(np.float32, rows * cols // group)
        return (q * np.repeat(s, group)).astype(F32).reshape(rows, cols)

    def gw_int8(self, e, rows, cols, group, asym):
        k, n = cols, rows
        u = self.take(np.uint8, e * k * n).reshape(e, k, n)
        s = self.take(np.float16, e * (k // group) * n).reshape(e, k // group, n).astype(F32)
        z = self.take(np.float16, e * (k // group) * n).reshape(e, k // group, n).astype(F32) if asym else None
        out = []
        for x in range(e):
            w = np.empty((n, k), dtype=F32)
            for kk in range(k):
                v = (u[x, kk].astype(F32) - F32(128)) * s[x, kk // group]
                if asym:
                    v = v + z[x, kk // group]
                w[:, kk] = v
            out.append(w)
        return out

    def awq(self, e, rows, cols, group):
        k, n = cols, rows
        qw = self.take(np.int32, e * k * (n // 8)).reshape(e, k, n // 8).view(np.uint32)
        qz = self.take(np.int32, e * (k // group) * (n // 8)).reshape(e, k // group, n // 8).view(np.uint32)
        s = self.take(np.float16, e * (k // group) * n).reshape(e, k // group, n).astype(F32)
        return [awq_dequant(qw[x], qz[x], s[x], group) for x in range(e)]


def unpack_nibbles(words):
    r, m = words.shape
    out = np.empty((r, m * 8), dtype=np.int64)
    for col in range(m * 8):
        out[:, col] = (words[:, col // 8].astype(np.int64) >> (4 * NIBBLE_OF[col % 8])) & 0xF
    return out


def awq_dequant(qw, qz, s, group):
    q = unpack_nibbles(qw).astype(F32)                  # [K][N]
    z = unpack_nibbles(qz).astype(F32)                  # [K/G][N]
    k = q.shape[0]
    rows = np.arange(k) // group
    return np.ascontiguousarray(((q - z[rows]) * s[rows]).astype(F32).T)


def parse_ajc1_like(data, cfg, moe):
    h = struct.unpack_from("<I11i", data, 0)
    magic, version, dim, hidden, nl, nh, nkv, vocab, maxseq, hd, shared, group = h
    expect_magic = 0x6D6F6533 if moe else 0x616A6331
    assert magic == expect_magic and version == 1, (hex(magic), version)
    inner = cfg["moe_intermediate_size"] if moe else cfg["intermediate_size"]
    assert (dim, hidden, nl, nh, nkv, vocab, maxseq, hd) == (
        cfg["hidden_size"], inner, cfg["num_hidden_layers"], cfg["num_attention_heads"],
        cfg["num_key_value_heads"], cfg["vocab_size"], cfg["max_position_embeddings"], cfg["head_dim"])
    theta, eps = struct.unpack_from("<ff", data, 0x40)
    assert (theta or 1e6) == np.float32(cfg["rope_theta"]) and (eps or np.float32(1e-6)) == np.float32(cfg["rms_norm_eps"])
    if F32(cfg["rope_theta"]) == F32(1e6):
        assert theta == 0.0, "default theta must stay zero padding"
    if F32(cfg["rms_norm_eps"]) == F32(1e-6):
        assert eps == 0.0, "default eps must stay zero padding"
    head = {"group": group, "shared": shared}
    if moe:
        ne, topk, norm = struct.unpack_from("<3i", data, 0x30)
        et, eg = struct.unpack_from("<2i", data, 0x48)
        assert (ne, topk, bool(norm)) == (cfg["num_experts"], cfg["num_experts_per_tok"], cfg["norm_topk_prob"])
        head.update(experts=ne, expert_type=et, expert_group=eg or group)
        assert data[0x3C:0x40] == bytes(4) and data[0x50:256] == bytes(256 - 0x50)
    else:
        assert data[0x30:0x40] == bytes(16) and data[0x48:256] == bytes(256 - 0x48)
    r = Reader(data)
    r.pos = 256
    d, hdim, L = dim, hd, nl
    qd, kvd = nh * hd, nkv * hd
    w = {}
    for key in ("input_layernorm", "post_attention_layernorm"):
        for l in range(L):
            w[f"model.layers.{l}.{key}.weight"] = r.take(np.float32, d)
    w["model.norm.weight"] = r.take(np.float32, d)
    for key in ("self_attn.q_norm", "self_attn.k_norm"):
        for l in range(L):
            w[f"model.layers.{l}.{key}.weight"] = r.take(np.float32, hdim)
    w["model.embed_tokens.weight"] = r.q8(vocab, d, group)
    shapes = {"q_proj": (qd, d), "k_proj": (kvd, d), "v_proj": (kvd, d), "o_proj": (d, qd),
              "gate_proj": (hidden, d), "down_proj": (d, hidden), "up_proj": (hidden, d)}
    if not moe:
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "down_proj", "up_proj"):
            sub = "self_attn" if proj in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"
            for l in range(L):
                w[f"model.layers.{l}.{sub}.{proj}.weight"] = r.q8(*shapes[proj], group)
    else:
        ne, et, eg = head["experts"], head["expert_type"], head["expert_group"]
        for l in range(L):
            p = f"model.layers.{l}"
            for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
                w[f"{p}.self_attn.{proj}.weight"] = r.q8(*shapes[proj], group)
            w[f"{p}.mlp.gate.weight"] = r.q8(ne, d, group)
            for proj in ("gate_proj", "down_proj", "up_proj"):
                rows, cols = shapes[proj]
                if et == 0:
                    mats = [r.q8(rows, cols, group) for _ in range(ne)]
                elif et in (1, 2):
                    mats = r.gw_int8(ne, rows, cols, eg, asym=(et == 2))
                elif et == 3:
                    mats = r.awq(ne, rows, cols, eg)
                else:
                    raise ValueError(f"expert_type {et}")
                for x, m in enumerate(mats):
                    w[f"{p}.mlp.experts.{x}.{proj}.weight"] = m
    if not shared:
        w["lm_head.weight"] = r.q8(vocab, d, group)
    assert r.pos == len(data), f"size {len(data)} but content ends at {r.pos}"
    return w, head


def parse_ak48(data, cfg, group_expected):
    magic, version, dim, hidden, nl, nh, nkv, vocab, maxseq = struct.unpack_from("<I8i", data, 0)
    shared, hd, group, theta, eps = struct.unpack_from("<Biiff", data, 36)
    assert magic == 0x616B3438 and version == 5
    assert (dim, hidden, nl, nh, nkv, vocab, maxseq, hd, group) == (
        cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"],
        cfg["num_key_value_heads"], cfg["vocab_size"], cfg["max_position_embeddings"], cfg["head_dim"],
        group_expected)
    assert (theta or 1e6) == np.float32(cfg["rope_theta"]) and (eps or np.float32(1e-6)) == np.float32(cfg["rms_norm_eps"])
    assert data[53:256] == bytes(256 - 53)
    r = Reader(data)
    r.pos = 256
    L, d = nl, dim
    qd, kvd = nh * hd, nkv * hd
    w = {}
    f16 = lambda n: r.take(np.float16, n).astype(F32)  # noqa: E731
    for key in ("input_layernorm", "post_attention_layernorm"):
        for l in range(L):
            w[f"model.layers.{l}.{key}.weight"] = f16(d)
    w["model.norm.weight"] = f16(d)
    w["model.embed_tokens.weight"] = f16(vocab * d).reshape(vocab, d)
    shapes = {"q_proj": (qd, d), "k_proj": (kvd, d), "v_proj": (kvd, d), "o_proj": (d, qd),
              "gate_proj": (hidden, d), "down_proj": (d, hidden), "up_proj": (hidden, d)}
    for proj in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "down_proj", "up_proj"):
        sub = "self_attn" if proj in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"
        for l in range(L):
            w[f"model.layers.{l}.{sub}.{proj}.weight"] = r.awq(1, *shapes[proj], group)[0]
    if not shared:
        w["lm_head.weight"] = f16(vocab * d).reshape(vocab, d)
    for key in ("self_attn.q_norm", "self_attn.k_norm"):
        for l in range(L):
            w[f"model.layers.{l}.{key}.weight"] = f16(hd)
    assert r.pos == len(data), f"size {len(data)} but content ends at {r.pos}"
    return w, {"shared": shared, "group": group}


def spec_from_config(cfg):
    for spec in tm.SPECS.values():
        if tm.config_json(spec)["hidden_size"] == cfg["hidden_size"] and \
                tm.config_json(spec)["num_hidden_layers"] == cfg["num_hidden_layers"] and \
                spec["arch"] == cfg["architectures"][0] and spec["rope_theta"] == cfg["rope_theta"]:
            return spec
    raise ValueError("no spec for config")


def check_files(golden, manifest):
    worst = 0.0
    for f in manifest["files"]:
        path = os.path.join(golden, f["file"])
        data = open(path, "rb").read()
        assert hashlib.sha256(data).hexdigest() == f["sha256"], f["file"]
        model = manifest["models"][f["model"]]
        cfg = json.load(open(os.path.join(golden, model["dir"], "config.json")))
        if f["format"] == "ak48":
            awq_cfg = json.load(open(os.path.join(golden, model["dir"] + "-awq", "config.json")))
            w, head = parse_ak48(data, cfg, awq_cfg["quantization_config"]["group_size"])
        else:
            w, head = parse_ajc1_like(data, cfg, moe=(f["format"] == "moe3"))
            assert head["group"] == model["q8_0_group_size"]
        assert bool(head["shared"]) == cfg["tie_word_embeddings"]
        spec = spec_from_config(cfg)
        hf = tm.build_hf_model(spec)
        tm.load_weights(hf, spec, w)
        sch = model["schemes"][f["scheme"]]
        diff = 0.0
        for seq, rec in zip(model["sequences"], sch["logits"]):
            gold = np.fromfile(os.path.join(golden, rec["file"]), dtype="<f4").reshape(rec["shape"])
            diff = max(diff, float(np.abs(tm.logits_for(hf, seq) - gold).max()))
        print(f"  {f['file']}: parsed, header ok, size exact, logits vs {f['scheme']} goldens max |diff| {diff:.3g}")
        worst = max(worst, diff)
    return worst


def check_manifest(golden, manifest):
    n = 0
    for name, model in manifest["models"].items():
        for scheme, sch in model.get("schemes", {}).items():
            for seq, rec in zip(model["sequences"], sch["logits"]):
                path = os.path.join(golden, rec["file"])
                gold = np.fromfile(path, dtype="<f4")
                assert gold.size == rec["shape"][0] * rec["shape"][1] and rec["shape"][0] == len(seq)
                gold = gold.reshape(rec["shape"])
                assert gold.argmax(1).tolist() == rec["top1"], rec["file"]
                assert np.isfinite(gold).all()
                n += 1
    print(f"  manifest: {n} logits files match their shapes and top-1 lists")


def autoawq_checks(golden, manifest):
    try:
        sys.modules.setdefault("datasets", types.ModuleType("datasets"))  # autoawq imports it, never uses it here
        sys.modules["datasets"].load_dataset = None
        import torch
        import awq
        from awq.modules.linear.gemm import WQLinear_GEMM
        from awq.utils.packing_utils import dequantize_gemm
    except Exception as e:  # noqa: BLE001
        print(f"  autoawq not importable ({e}); AutoAWQ cross-checks skipped")
        return False
    from safetensors.numpy import load_file
    ver = getattr(awq, "__version__", "?")

    def pack_like_autoawq(w_deq, scales, zeros, group):
        lin = torch.nn.Linear(w_deq.shape[1], w_deq.shape[0], bias=False)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w_deq))
        m = WQLinear_GEMM.from_linear(lin, 4, group, False, torch.from_numpy(scales.astype(np.float32)),
                                      torch.from_numpy(zeros.astype(np.float32)))
        return m.qweight.numpy(), m.qzeros.numpy()

    # The reference layer.
    d = os.path.join(golden, "awq_packing")
    ap = manifest["awq_packing"]
    K, N, G = ap["K"], ap["N"], ap["group_size"]
    qweight = np.fromfile(os.path.join(d, "qweight.i32"), dtype="<i4").reshape(K, N // 8)
    qzeros = np.fromfile(os.path.join(d, "qzeros.i32"), dtype="<i4").reshape(K // G, N // 8)
    scales = np.fromfile(os.path.join(d, "scales.f16"), dtype="<f2").reshape(K // G, N)
    zeros = np.fromfile(os.path.join(d, "zeros.u8"), dtype="u1").reshape(K // G, N)
    deq = np.fromfile(os.path.join(d, "dequant.f32"), dtype="<f4").reshape(N, K)
    theirs = dequantize_gemm(torch.from_numpy(qweight), torch.from_numpy(qzeros),
                             torch.from_numpy(scales.astype(np.float32)), 4, G).numpy()
    assert np.array_equal(theirs.T, deq), "AutoAWQ dequantize_gemm disagrees with dequant.f32"
    qw2, qz2 = pack_like_autoawq(deq, scales, zeros, G)
    assert np.array_equal(qw2, qweight) and np.array_equal(qz2, qzeros), "AutoAWQ packs the layer differently"
    count, packed, skipped = 1, 1, 0
    # Every projection of the AutoAWQ checkpoints.
    for name, model in manifest["models"].items():
        if "autoawq_checkpoint_of" not in model:
            continue
        sd = load_file(os.path.join(golden, model["dir"], "model.safetensors"))
        g = model["config"]["quantization_config"]["group_size"]
        for key in sd:
            if not key.endswith(".qweight"):
                continue
            base = key[: -len(".qweight")]
            qw, qz, s = sd[key], sd[base + ".qzeros"], sd[base + ".scales"]
            w_deq = dequantize_gemm(torch.from_numpy(qw), torch.from_numpy(qz),
                                    torch.from_numpy(s.astype(np.float32)), 4, g).numpy().T.copy()
            mine = awq_dequant(qw.view(np.uint32), qz.view(np.uint32), s.astype(F32), g)
            assert np.array_equal(w_deq, mine), key
            count += 1
            if qw.shape[1] * 8 % 32 != 0:
                # from_linear sizes its output as N // 32 * 4 words: it only handles N % 32 == 0.
                skipped += 1
                continue
            zeros_int = unpack_nibbles(qz.view(np.uint32))
            qw2, qz2 = pack_like_autoawq(w_deq, s, zeros_int, g)
            assert np.array_equal(qw2, qw) and np.array_equal(qz2, qz), key
            packed += 1
    print(f"  autoawq {ver}: dequantize_gemm agrees on {count} layers; WQLinear_GEMM.from_linear packs "
          f"{packed} identically ({skipped} with N % 32 != 0 skipped: from_linear cannot size them)")
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--golden", default=os.path.join(REPO, "tests", "golden"))
    args = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    manifest = json.load(open(os.path.join(args.golden, "manifest.json")))
    check_manifest(args.golden, manifest)
    worst = check_files(args.golden, manifest)
    autoawq_checks(args.golden, manifest)
    print(f"OK (worst file-vs-golden logit difference {worst:.3g})")


if __name__ == "__main__":
    main()
