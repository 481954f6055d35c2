#!/usr/bin/env python3
"""Makes the committed copies of the recorded GPU tuning spaces (Kernel Tuner cache format, MIT licence,
FAIR benchmark hub of the AutoTuningAssociation) small enough to ship: every point, its parameters, its
recorded time or failure string and the compile/verification/benchmark/framework times are kept; the 32 raw
repetitions per point ('times') and derived metrics (GFLOP/s, GB/s) are dropped. Also writes the small
space the tests replay (a slice of the A4000 convolution space with its failures and raw samples).

  python3 scripts/tuner/slim_spaces.py SRC_DIR   # SRC_DIR holds convolution_milo_A100.json.gz, ...
"""
import gzip
import json
import os
import sys

KEEP = ("time", "compile_time", "verification_time", "benchmark_time", "framework_time")
NAMES = ["convolution_milo_A100", "convolution_milo_A4000", "dedispersion_milo_A100", "dedispersion_milo_A4000",
         "gemm_RTX_2080_Ti", "gemm_RTX_Titan", "convolution_RTX_Titan", "pnpoly_RTX_Titan"]


def write(path, doc):
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        f.write(json.dumps(doc, separators=(",", ":")).encode())


def main():
    src = sys.argv[1]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out_dir = os.path.join(root, "tuner", "spaces")
    for name in NAMES:
        d = json.load(gzip.open(os.path.join(src, name + ".json.gz")))
        keys = d["tune_params_keys"]
        cache = {}
        for k, e in d["cache"].items():
            slim = {p: e[p] for p in keys}
            for f in KEEP:
                if f in e:
                    v = e[f]
                    slim[f] = round(v, 6) if isinstance(v, float) else v
            cache[k] = slim
        d["cache"] = cache
        write(os.path.join(out_dir, name + ".json.gz"), d)
    # Test slice: A4000 convolution with block_size_x <= 64 and tile sizes <= 2 (keeps failures and samples).
    d = json.load(gzip.open(os.path.join(src, "convolution_milo_A4000.json.gz")))
    sel = {}
    for k, e in d["cache"].items():
        if e["block_size_x"] <= 64 and e["tile_size_x"] <= 2 and e["tile_size_y"] <= 2:
            e = {f: v for f, v in e.items() if f in d["tune_params_keys"] or f in KEEP or f == "times"}
            if "times" in e:
                e["times"] = [round(t, 5) for t in e["times"][:8]]
            sel[k] = e
    d["cache"] = sel
    d["tune_params"]["block_size_x"] = [v for v in d["tune_params"]["block_size_x"] if v <= 64]
    d["tune_params"]["tile_size_x"] = [1, 2]
    d["tune_params"]["tile_size_y"] = [1, 2]
    write(os.path.join(root, "tests", "tuner", "data", "convolution_A4000_slice.json.gz"), d)


if __name__ == "__main__":
    main()
