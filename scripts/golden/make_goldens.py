#!/usr/bin/env python3
"""Regenerates everything under tests/golden/ (deterministic; fixed seeds):

  models/<name>/            tiny Hugging Face checkpoints (config.json + model.safetensors, float32)
  models/<name>-awq/        AutoAWQ GEMM checkpoints of the dense models
  logits/<model>/<scheme>/seqN.f32   transformers' logits [T, vocab] from each scheme's dequantized weights
  files/                    qwen3.c-layout files (ajc1, moe3, ak48) from the independent Python writer
  awq_packing/              a small AWQ layer: packed tensors and their unpacked values
  manifest.json             what all of the above is, with shapes, quantization parameters and versions

Usage: .venv-golden/bin/python scripts/golden/make_goldens.py [--out tests/golden]
"""
import argparse
import hashlib
import json
import os
import platform
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import awq_packing  # noqa: E402
import qwen3c_writer as writer  # noqa: E402
import quant  # noqa: E402
import schemes  # noqa: E402
import tiny_models as tm  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
COMMAND = ".venv-golden/bin/python scripts/golden/make_goldens.py"
QCONVERT = "qconvert convert --no-tokenizer --out FILE"  # the run that should reproduce a file byte for byte


def versions():
    import safetensors
    import torch
    import transformers
    return {"python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__,
            "transformers": transformers.__version__, "safetensors": safetensors.__version__}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def save_hf_dir(path, cfg, tensors):
    from safetensors.numpy import save_file
    os.makedirs(path, exist_ok=True)
    write_json(os.path.join(path, "config.json"), cfg)
    save_file({k: np.ascontiguousarray(v) for k, v in sorted(tensors.items())},
              os.path.join(path, "model.safetensors"), metadata={"format": "pt"})


def load_hf_logits(path, seqs):
    """Logits of the committed checkpoint as transformers loads it from disk."""
    import torch
    import transformers
    extra = {"experts_implementation": "eager"} if "moe" in os.path.basename(path) else {}
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32,
                                                              attn_implementation="eager", **extra).eval()
    return [tm.logits_for(model, s) for s in seqs]


def fp64_logits(spec, weights, seqs):
    """Same weights in float64: the distance to the float32 result shows float32 rounding noise."""
    import torch
    model = tm.build_hf_model(spec)
    tm.load_weights(model, spec, weights)
    model = model.to(torch.float64)
    out = []
    for s in seqs:
        with torch.no_grad():
            out.append(model(input_ids=torch.tensor([s]), use_cache=False).logits[0].numpy())
    return out


def prefix_logits(model, seqs):
    """Last-position logits of every prefix run on its own (how a KV-cache decoder sees them)."""
    return [np.stack([tm.logits_for(model, s[: t + 1])[-1] for t in range(len(s))]) for s in seqs]


def top1_and_margin(lg):
    order = np.argsort(-lg, axis=1, kind="stable")
    top = lg[np.arange(len(lg)), order[:, 0]]
    second = lg[np.arange(len(lg)), order[:, 1]]
    return order[:, 0].astype(int).tolist(), [round(float(x), 6) for x in (top - second)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "golden"))
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    for sub in ("models", "logits", "files", "awq_packing"):
        shutil.rmtree(os.path.join(out, sub), ignore_errors=True)
    os.makedirs(out, exist_ok=True)

    import torch
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # one summation order for every run

    manifest = {
        "format_version": 1,
        "generated_by": "scripts/golden/make_goldens.py",
        "regenerate": COMMAND,
        "versions": versions(),
        "conventions": {
            "logits": "raw little-endian float32, row-major [T, vocab]: row t = logits after tokens 0..t",
            "paths": "relative to tests/golden/",
            "top1": "argmax per position (lowest id on ties); top1_margin = best minus second-best logit",
            "dequantized": "each scheme's logits come from transformers (float32, eager attention) running the "
                           "weights the file format holds, widened back to float32",
        },
        "models": {},
        "files": [],
    }
    stats = {}

    for name, spec in tm.SPECS.items():
        print(f"[{name}]", flush=True)
        cfg = tm.config_json(spec)
        w = tm.make_weights(spec)
        seqs = tm.make_sequences(spec)
        model_dir = os.path.join(out, "models", name)
        save_hf_dir(model_dir, cfg, {k: v for k, v in w.items()})

        model = tm.build_hf_model(spec)
        entry = {
            "dir": f"models/{name}",
            "architecture": spec["arch"],
            "config": cfg,
            "weights_seed": spec["seed"],
            "q8_0_group_size": writer.q8_group(cfg),
            "sequences": seqs,
            "schemes": {},
        }
        st = stats[name] = {}
        for scheme in schemes.schemes_for(spec):
            sw, desc = schemes.scheme_weights(spec, w, scheme)
            tm.load_weights(model, spec, sw)
            logits = [tm.logits_for(model, s) for s in seqs]
            recs = []
            for i, lg in enumerate(logits):
                rel = f"logits/{name}/{scheme}/seq{i}.f32"
                os.makedirs(os.path.dirname(os.path.join(out, rel)), exist_ok=True)
                lg.astype("<f4").tofile(os.path.join(out, rel))
                top1, margin = top1_and_margin(lg)
                recs.append({"file": rel, "shape": [len(seqs[i]), spec["vocab_size"]],
                             "top1": top1, "top1_margin": margin})
            sch = dict(desc)
            sch["logits"] = recs
            if tm.is_moe(spec):
                sch["min_router_logit_gap"] = round(min(tm.router_margins(model, spec, s) for s in seqs), 6)
            entry["schemes"][scheme] = sch
            st[scheme] = logits
            if scheme == "f32":
                # Numerical-noise yardsticks for the recommended tolerance.
                disk = load_hf_logits(model_dir, seqs)
                st["disk_vs_memory"] = max(float(np.abs(a - b).max()) for a, b in zip(disk, logits))
                f64 = fp64_logits(spec, w, seqs)
                st["fp32_vs_fp64"] = max(float(np.abs(a - b).max()) for a, b in zip(logits, f64))
                pre = prefix_logits(model, seqs)
                st["prefix_vs_batched"] = max(float(np.abs(a - b).max()) for a, b in zip(pre, logits))
        manifest["models"][name] = entry

        if not tm.is_moe(spec):
            awq_sd, awq_cfg = schemes.awq_checkpoint(spec, w)
            save_hf_dir(os.path.join(out, "models", f"{name}-awq"), awq_cfg, awq_sd)
            manifest["models"][f"{name}-awq"] = {
                "dir": f"models/{name}-awq",
                "architecture": spec["arch"],
                "autoawq_checkpoint_of": name,
                "config": awq_cfg,
                "golden_scheme": f"models/{name} scheme ak48-awq (its logits are this checkpoint's)",
                "description": "AutoAWQ GEMM layout: <proj>.qweight int32 [K, N/8], <proj>.qzeros int32 "
                               "[K/G, N/8], <proj>.scales fp16 [K/G, N] for the 7 projections per layer; "
                               "norms, embedding and lm_head (absent when tied) fp16",
            }
            write_file(out, manifest, f"{name}.ajc1", writer.ajc1_bytes(cfg, w), name, "ajc1", "ajc1-q8_0",
                       f"{QCONVERT} --hf tests/golden/models/{name} --format ajc1")
            write_file(out, manifest, f"{name}.ak48", writer.ak48_bytes(awq_cfg, awq_sd), name, "ak48",
                       "ak48-awq", f"{QCONVERT} --hf tests/golden/models/{name}-awq --format ak48")
        else:
            # moe-norm (header group 64, expert group 32) carries every expert type; moe-nonorm only Q8_0,
            # to keep the committed data small (qconvert makes the others from models/moe-nonorm).
            kinds = ("q8_0", "int8-sym", "int8-asym", "awq") if name == "moe-norm" else ("q8_0",)
            for kind in kinds:
                eg = None if kind == "q8_0" else schemes.EXPERT_GROUP
                write_file(out, manifest, f"{name}.{kind}.moe3", writer.moe3_bytes(cfg, w, kind, eg), name,
                           "moe3", f"moe3-{kind}",
                           f"{QCONVERT} --hf tests/golden/models/{name} --format moe3"
                           + ("" if eg is None else f" --expert-type {kind} --expert-group-size {eg}"))

    manifest["awq_packing"] = awq_packing.write(os.path.join(out, "awq_packing"))
    manifest["observed"] = summarize(stats)
    manifest["tolerance"] = {
        "reference_abs": 1e-3,
        "note": "Recommended bound on |logit - golden| for a reference (dequantize, fp32 activations) "
                "implementation reading a file of the same scheme. The goldens' own float32 noise "
                "(see observed.noise) is about two orders of magnitude smaller. Fast paths that quantize "
                "activations: compare top1 only where top1_margin exceeds their own error bound.",
    }
    write_json(os.path.join(out, "manifest.json"), manifest)
    print(json.dumps(manifest["observed"], indent=1))


def write_file(out, manifest, fname, data, model, fmt, scheme, equivalent):
    rel = f"files/{fname}"
    os.makedirs(os.path.join(out, "files"), exist_ok=True)
    with open(os.path.join(out, rel), "wb") as f:
        f.write(data)
    manifest["files"].append({"file": rel, "format": fmt, "model": model, "scheme": scheme,
                              "bytes": len(data), "sha256": sha256(os.path.join(out, rel)),
                              "equivalent_to": equivalent})


def summarize(stats):
    obs = {"noise": {}, "schemes_vs_f32": {}}
    for name, st in stats.items():
        obs["noise"][name] = {k: float(f"{st[k]:.3g}") for k in ("disk_vs_memory", "fp32_vs_fp64",
                                                                 "prefix_vs_batched")}
        ref = st["f32"]
        for scheme, lg in st.items():
            if scheme == "f32" or not isinstance(lg, list):
                continue
            diff = max(float(np.abs(a - b).max()) for a, b in zip(lg, ref))
            mean = float(np.mean(np.concatenate([np.abs(a - b).ravel() for a, b in zip(lg, ref)])))
            agree = sum(int((a.argmax(1) == b.argmax(1)).sum()) for a, b in zip(lg, ref))
            total = sum(len(a) for a in ref)
            obs["schemes_vs_f32"][f"{name}/{scheme}"] = {"max_abs_logit_diff": float(f"{diff:.4g}"),
                                                         "mean_abs_logit_diff": float(f"{mean:.4g}"),
                                                         "top1_agreement": f"{agree}/{total}"}
    return obs


if __name__ == "__main__":
    main()
