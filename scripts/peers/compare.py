#!/usr/bin/env python3
"""qbench against llama-bench on the same checkpoints, interleaved, and the results table.

Run by cpu_vs_llama_cpp.sh, which prepares the models and the binaries. For every round, shape and thread
count it runs both tools back to back (alternating which goes first), so both see the same neighbours on a
shared machine; the table gives medians over the rounds and the ratio qtune / llama.cpp of every round.

Measurements (same threads, prompt and generation lengths on both sides):
  prefill   pp512: a 512-token prompt at depth 0 (qbench --prompt 512; llama-bench -p 512);
  decode    32 steps after 0, 512 and 2048 cached tokens (qbench --prompt 1|512|2048 --gen 32;
            llama-bench -n 32 -d 0|512|2048);
  peak RSS  of the whole process (wait4's ru_maxrss) for a 512-token prompt and 32 decode steps, with
            qbench's bandwidth buffer off (--bandwidth-mb 0) so only the runtime's own memory counts;
  roofline  qtune's depth-0 decode as a fraction of the read bandwidth qbench measures in the same process.
Both model files are read once before the first round, so both start from the page cache. Both tools run one
unmeasured warm-up first (llama-bench's default; qbench --warmup 1), so one-time work such as
the MoE experts' repack on first use is not in the figures; it is in the peak RSS run, which includes it.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

SHAPES = [
    ("qwen3-0.6b", "Qwen3-0.6B shape (28 layers)"),
    ("qwen3-30b-a3b-L2", "Qwen3-30B-A3B shape, 2 layers (128 experts, top-8)"),
]
PROMPT = 512
GEN = 32
DEPTHS = [0, 512, 2048]
GOAL_SPEED = 1.2
GOAL_ROOFLINE = 0.85


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def run(cmd):
    """Runs cmd; returns (stdout, peak RSS in MB, 1-minute load average before and after)."""
    load0 = loadavg()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, errors = out.read().decode(), err.read().decode()
    if p.returncode != 0:
        sys.exit(f"compare.py: {' '.join(cmd)} failed ({p.returncode}):\n{errors[-2000:]}")
    return text, usage.ru_maxrss / 1024.0 * 1.048576, (load0, loadavg())


def qtune_round(a, model, threads):
    base = [a.qbench, "--model", model, "--threads", str(threads), "--gen", str(GEN), "--repeat", "1", "--warmup", "1", "--json"]
    r, loads = {}, []
    text, rss, load = run(base + ["--prompt", str(PROMPT), "--bandwidth-mb", "0"])
    j = json.loads(text)
    r["pp"], r["tg512"], r["rss"] = j["prefill_tok_s"], j["decode_tok_s"], rss
    loads.append(load)
    text, _, load = run(base + ["--prompt", "1", "--bandwidth-mb", "512"])
    j = json.loads(text)
    r["tg0"], r["roofline"], r["read_gbps"] = j["decode_tok_s"], j["decode_fraction_of_roofline"], j["read_bandwidth_gbps"]
    r["kv"] = j["kv_cache"]
    loads.append(load)
    text, _, load = run(base + ["--prompt", "2048", "--bandwidth-mb", "0"])
    r["tg2048"] = json.loads(text)["decode_tok_s"]
    loads.append(load)
    r["load"] = loads
    return r


def llama_round(a, model, threads):
    base = [a.llama_bench, "--model", model, "--threads", str(threads), "-r", "1", "-o", "json"]
    r, loads = {}, []
    text, rss, load = run(base + ["-p", str(PROMPT), "-n", str(GEN)])
    for t in json.loads(text):
        if t["n_prompt"] == PROMPT and t["n_gen"] == 0:
            r["pp"] = t["avg_ts"]
        if t["n_gen"] == GEN and t["n_prompt"] == 0:
            r["tg0"] = t["avg_ts"]
        r["build"] = f"{t.get('build_commit', '?')} (build {t.get('build_number', '?')})"
        r["cpu"] = t.get("cpu_info", "")
    r["rss"] = rss
    loads.append(load)
    text, _, load = run(base + ["-p", "0", "-n", str(GEN), "-d", "512,2048"])
    for t in json.loads(text):
        r[f"tg{t['n_depth']}"] = t["avg_ts"]
    loads.append(load)
    r["load"] = loads
    return r


ROWS = [
    ("pp", "prefill pp512 (tok/s)", True),
    ("tg0", "decode at depth 0 (tok/s, 32 steps)", True),
    ("tg512", "decode at depth 512 (tok/s)", True),
    ("tg2048", "decode at depth 2048 (tok/s)", True),
    ("rss", "peak RSS, pp512 + 32 decode steps (MB)", False),
]


def fmt(v):
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qbench", required=True)
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--llama-src", required=True)
    ap.add_argument("--llama-version", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--out", required=True)
    ap.add_argument("--raw", required=True)
    a = ap.parse_args()
    if a.rounds < 3:
        print("compare.py: fewer than 3 rounds make the ratios unreliable on a shared machine", file=sys.stderr)

    a.qtune_rev = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "describe", "--always", "--dirty"],
                                 capture_output=True, text=True).stdout.strip()
    # Both tools map their model files; reading them once first puts both in the page cache, as any run after
    # the first finds them, so neither side's figures include reads from disk.
    for shape, _ in SHAPES:
        for ext in (".bin", ".gguf"):
            with open(os.path.join(a.models, shape + ext), "rb") as f:
                while f.read(1 << 24):
                    pass
    results = {}  # (shape, threads) -> {"qtune": [...], "llama": [...]}
    started = datetime.datetime.now(datetime.timezone.utc)
    with open(a.raw, "a") as raw:
        for rnd in range(a.rounds):
            for shape, _ in SHAPES:
                for threads in a.threads:
                    q_model = os.path.join(a.models, shape + ".bin")
                    l_model = os.path.join(a.models, shape + ".gguf")
                    order = ["qtune", "llama"] if rnd % 2 == 0 else ["llama", "qtune"]
                    for side in order:
                        print(f"[compare] round {rnd + 1}/{a.rounds} {shape} {threads}t {side}", file=sys.stderr, flush=True)
                        r = qtune_round(a, q_model, threads) if side == "qtune" else llama_round(a, l_model, threads)
                        results.setdefault((shape, threads), {}).setdefault(side, []).append(r)
                        raw.write(json.dumps({"round": rnd, "shape": shape, "threads": threads, "side": side, **r}) + "\n")
                        raw.flush()
    finished = datetime.datetime.now(datetime.timezone.utc)
    write_report(a, results, started, finished)


def write_report(a, results, started, finished):
    qtune_rev = a.qtune_rev
    any_llama = next(iter(results.values()))["llama"][0]
    loads = [l for v in results.values() for side in v.values() for r in side for pair in r["load"] for l in pair]
    cpu = any_llama.get("cpu") or platform.processor()
    L = []
    L.append("# CPU runtime vs llama.cpp, side by side")
    L.append("")
    L.append(f"Written by `scripts/peers/cpu_vs_llama_cpp.sh` ({started:%d %b %Y %H:%M}–{finished:%H:%M} UTC). "
             f"qtune `{qtune_rev}` (qbench, fast path); llama.cpp as vendored in PyPI's llama-cpp-python "
             f"{a.llama_version}, `{any_llama['build']}`, llama-bench built CPU-only with GGML_NATIVE.")
    L.append("")
    # The benchmark itself keeps up to its thread count busy; load beyond the cores is someone else's.
    busy = max(loads) > (os.cpu_count() or 1) + 0.5
    neighbours = ("The machine was shared with other work" if busy else
                  "Nothing else ran beside the benchmark")
    L.append(f"Machine: {cpu}, {os.cpu_count()} CPUs seen. {neighbours}: "
             f"1-minute load average {min(loads):.2f}–{max(loads):.2f} over the runs, so absolute rates "
             f"{'move' if busy else 'still move a little'} between rounds; the runs are interleaved (both tools back to back, alternating which goes first) and the "
             f"ratios are the figures to read. {a.rounds} rounds; values are medians over the rounds, the ratio is "
             f"qtune / llama.cpp of the medians, and the range beside it spans the per-round ratios.")
    L.append("")
    L.append("Both sides run the same synthetic checkpoint: `qconvert synthetic --format hf --dtype bf16` (seed 1), "
             "converted to GGUF Q8_0 by llama.cpp's `convert_hf_to_gguf.py` and to ajc1 (dense) / moe3 (MoE) Q8_0 by "
             "`qconvert convert`. Prefill is a 512-token prompt at depth 0; decode is 32 steps after 0 (qbench: 1), 512 "
             "and 2048 cached tokens; peak RSS is wait4's ru_maxrss of a run of a 512-token prompt and 32 decode "
             "steps, with qbench's bandwidth buffer off. Both model files are read once before the first round, so "
             "neither side reads from disk. Each run is measured once after one unmeasured warm-up, on both "
             "sides (llama-bench's default; `qbench --warmup 1`), so the MoE experts' one-time repack on first use "
             "is not in the rates.")
    L.append("")
    goals = []
    for shape, title in SHAPES:
        for threads in a.threads:
            v = results.get((shape, threads))
            if not v:
                continue
            q, l = v["qtune"], v["llama"]
            L.append(f"## {title}, {threads} thread{'s' if threads > 1 else ''}")
            L.append("")
            L.append("| measure | qtune | llama.cpp | ratio | per-round ratios |")
            L.append("|---|---|---|---|---|")
            ratios = {}
            for key, label, higher_better in ROWS:
                qm = statistics.median(r[key] for r in q)
                lm = statistics.median(r[key] for r in l)
                per = [qr[key] / lr[key] for qr, lr in zip(q, l)]
                ratios[key] = qm / lm
                L.append(f"| {label} | {fmt(qm)} | {fmt(lm)} | {qm / lm:.2f}× | {min(per):.2f}–{max(per):.2f} |")
            roof = statistics.median(r["roofline"] for r in q)
            bw = statistics.median(r["read_gbps"] for r in q)
            L.append("")
            L.append(f"qtune's depth-0 decode reaches {roof * 100:.1f}% of the roofline (read bandwidth {bw:.1f} GB/s "
                     f"measured by qbench in the same process); KV cache {q[0]['kv']}.")
            L.append("")
            name = f"{title}, {threads}t"
            goals.append((name, "prefill pp512 ≥ 1.2× llama.cpp", ratios["pp"] >= GOAL_SPEED, f"{ratios['pp']:.2f}×"))
            goals.append((name, "decode at depth 0 ≥ 1.2× llama.cpp", ratios["tg0"] >= GOAL_SPEED, f"{ratios['tg0']:.2f}×"))
            goals.append((name, "decode at depth 512 ≥ 1.2× llama.cpp", ratios["tg512"] >= GOAL_SPEED, f"{ratios['tg512']:.2f}×"))
            goals.append((name, "decode at depth 0 ≥ 85% of the roofline", roof >= GOAL_ROOFLINE, f"{roof * 100:.1f}%"))
            goals.append((name, "peak RSS ≤ llama.cpp's", ratios["rss"] <= 1.0, f"{ratios['rss']:.2f}×"))
    L.append("## Goals (issue 18)")
    L.append("")
    L.append("| model | goal | measured | holds |")
    L.append("|---|---|---|---|")
    for name, goal, ok, measured in goals:
        L.append(f"| {name} | {goal} | {measured} | {'yes' if ok else '**no**'} |")
    L.append("")
    L.append(f"Raw per-run figures: `{os.path.basename(a.raw)}` in the peers work folder (one JSON line per tool run).")
    L.append("")
    with open(a.out, "w") as f:
        f.write("\n".join(L))
    print(f"[compare] wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
