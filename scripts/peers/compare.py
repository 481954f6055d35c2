#!/usr/bin/env python3
"""qbench against llama-bench on the same checkpoints, interleaved, and the results table.

Run by cpu_vs_llama_cpp.sh, which prepares the models and the binaries. llama.cpp is measured on two paths:
  default   llama-bench's defaults: on a CPU with AMX, Q8_0 weights go to its AMX buffer; on others to its
            CPU_REPACK buffer where it has a repacked layout for Q8_0 on that CPU, or stay in plain buffers;
  generic   --repack 0: no extra buffer types, the plain Q8_0 path.
Which buffers held the weights on each path is read from llama-bench's own log (-v), and every llama.cpp figure
is labelled with it. The goals are judged against llama.cpp's fastest path on this machine, round by round.

For every round, shape and thread count it runs qtune and both llama.cpp paths back to back (rotating which
goes first), so all see the same neighbours on a shared machine; the table gives medians over the rounds.

Measurements (same threads, prompt and generation lengths on both sides):
  prefill   pp512: a 512-token prompt at depth 0 (qbench --prompt 512; llama-bench -p 512);
  decode    32 steps after 0, 512 and 2048 cached tokens (qbench --prompt 1|512|2048 --gen 32;
            llama-bench -n 32 -d 0|512|2048);
  peak RSS  of the whole process (wait4's ru_maxrss) for a 512-token prompt and 32 decode steps, with
            qbench's bandwidth buffer off (--bandwidth-mb 0) so only the runtime's own memory counts;
  roofline  qtune's depth-0 decode as a fraction of the read bandwidth qbench measures in the same process,
            with the share of the decode's CPU time a hypervisor stole (qbench, from /proc/stat).
Both model files are read once before the first round, so both start from the page cache. Both tools run one
unmeasured warm-up first (llama-bench's default; qbench --warmup 1), so one-time work such as
the MoE experts' repack on first use is not in the figures; it is in the peak RSS run, which includes it.

qtune is set up as its README tells a user to: before the rounds, `qbench --choose-decode` ranks its decode
variants on this CPU for each model (the Q8_0 decode with its software prefetch into L2, without it, and with
it into L1: which is fastest depends on the CPU) into a tuning store, and every qbench run is given that store
(--tuned-cache). Held to one instruction set (--isa), qtune runs its built-in choice instead: the ranking is of
the ISA qrun would run.
"""
import argparse
import datetime
import glob
import json
import os
import re
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
LLAMA_PATHS = [("default", []), ("generic", ["--repack", "0"])]
# Issue 29's goals, against llama.cpp's fastest path.
GOAL_PREFILL_AMX = 1.5      # where llama.cpp's fastest prefill runs on AMX tiles
GOAL_PREFILL_NO_AMX = 2.0   # where it does not (no AMX on the CPU)
GOAL_DECODE_DEPTH0 = 1.0
GOAL_DECODE_DEPTH2048 = 1.3
GOAL_ROOFLINE = 0.90


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def run(cmd):
    """Runs cmd; returns (stdout, stderr, peak RSS in MB, 1-minute load average before and after)."""
    load0 = loadavg()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, errors = out.read().decode(), err.read().decode(errors="replace")
    if p.returncode != 0:
        sys.exit(f"compare.py: {' '.join(cmd)} failed ({p.returncode}):\n{errors[-2000:]}")
    return text, errors, usage.ru_maxrss / 1024.0 * 1.048576, (load0, loadavg())


def cpu_description():
    """The CPU's model, caches and the ISA features that decide both tools' paths, from /proc and /sys."""
    model, flags = "unknown CPU", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "unknown CPU":
                model = value.strip()
            if key.strip() == "flags" and not flags:
                flags = set(value.split())
    caches = []
    for d in sorted(glob.glob("/sys/devices/system/cpu/cpu0/cache/index*")):
        try:
            level = open(os.path.join(d, "level")).read().strip()
            kind = open(os.path.join(d, "type")).read().strip()
            size = open(os.path.join(d, "size")).read().strip()
        except OSError:
            continue
        name = f"L{level}" + {"Data": "d", "Instruction": "i"}.get(kind, "")
        caches.append(f"{name} {size}")
    features = {
        "AVX2": "avx2" in flags,
        "AVX-VNNI": "avx_vnni" in flags,
        "AVX-512 F": "avx512f" in flags,
        "AVX-512 VNNI": "avx512_vnni" in flags,
        "AMX-TILE": "amx_tile" in flags,
        "AMX-INT8": "amx_int8" in flags,
        "AMX-BF16": "amx_bf16" in flags,
    }
    return {"model": model, "caches": caches, "features": features, "amx": features["AMX-INT8"]}


def llama_path(a, model, flags):
    """The buffer types llama.cpp put the weights in on this path, from its -v log: e.g. AMX, CPU_REPACK."""
    _, log, _, _ = run([a.llama_bench, "--model", model, "-p", "0", "-n", "1", "-r", "1", "-o", "json", "-v"] + flags)
    bufs = sorted(set(re.findall(r"(\S+) model buffer size", log)))
    if "AMX" in bufs:
        name = "AMX tiles (Q8_0 repacked to its AMX buffer)"
    elif "CPU_REPACK" in bufs:
        name = "repacked Q8_0 (CPU_REPACK buffer)"
    else:
        name = "generic Q8_0 (no AMX or repack buffer)"
    return {"name": name, "buffers": bufs, "amx": "AMX" in bufs}


def choose_decode(a, model, store):
    """qbench --choose-decode on this CPU and model, into `store`: the lines it printed (the ranking)."""
    text, _, _, _ = run([a.qbench, "--model", model, "--choose-decode", "--prompt", "1", "--gen", str(GEN),
                         "--repeat", "5", "--tuned-cache", store])
    return [l for l in text.splitlines() if l.strip()]


def qtune_round(a, model, threads):
    base = [a.qbench, "--model", model, "--threads", str(threads), "--gen", str(GEN), "--repeat", "1", "--warmup", "1", "--json"]
    if a.isa:
        base += ["--isa", a.isa]
    else:
        base += ["--tuned-cache", a.store]
    r, loads = {}, []
    text, _, rss, load = run(base + ["--prompt", str(PROMPT), "--bandwidth-mb", "0"])
    j = json.loads(text)
    r["pp"], r["tg512"], r["rss"], r["backend"] = j["prefill_tok_s"], j["decode_tok_s"], rss, j["backend"]
    r["amx"] = j.get("amx", "")
    loads.append(load)
    text, _, _, load = run(base + ["--prompt", "1", "--bandwidth-mb", "512"])
    j = json.loads(text)
    r["tg0"], r["roofline"], r["read_gbps"] = j["decode_tok_s"], j["decode_fraction_of_roofline"], j["read_bandwidth_gbps"]
    r["steal"] = j.get("decode_steal_fraction")
    r["kv"] = j["kv_cache"]
    loads.append(load)
    text, _, _, load = run(base + ["--prompt", "2048", "--bandwidth-mb", "0"])
    r["tg2048"] = json.loads(text)["decode_tok_s"]
    loads.append(load)
    r["load"] = loads
    return r


def llama_round(a, model, threads, flags):
    base = [a.llama_bench, "--model", model, "--threads", str(threads), "-r", "1", "-o", "json"] + flags
    r, loads = {}, []
    text, _, rss, load = run(base + ["-p", str(PROMPT), "-n", str(GEN)])
    for t in json.loads(text):
        if t["n_prompt"] == PROMPT and t["n_gen"] == 0:
            r["pp"] = t["avg_ts"]
        if t["n_gen"] == GEN and t["n_prompt"] == 0:
            r["tg0"] = t["avg_ts"]
        r["build"] = f"{t.get('build_commit', '?')} (build {t.get('build_number', '?')})"
    r["rss"] = rss
    loads.append(load)
    text, _, _, load = run(base + ["-p", "0", "-n", str(GEN), "-d", "512,2048"])
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


def best(rounds, key, higher_better):
    """llama.cpp's fastest path (the smallest peak RSS) in each round: {path: [round results]} -> per-round values."""
    paths = list(rounds)
    pick = max if higher_better else min
    return [pick(rounds[p][i][key] for p in paths) for i in range(len(rounds[paths[0]]))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qbench", required=True)
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--llama-src", required=True)
    ap.add_argument("--llama-version", required=True)
    ap.add_argument("--llama-compiler", required=True, help="the compiler that built llama-bench (its --version line)")
    ap.add_argument("--models", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--out", required=True)
    ap.add_argument("--raw", required=True)
    ap.add_argument("--isa", help="both tools held to this instruction set: qbench --isa, llama-bench built for it")
    ap.add_argument("--llama-arch", default="GGML_NATIVE", help="the instruction-set options llama-bench was built with")
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
    cpu = cpu_description()
    # qtune's decode variant ranked on this CPU first (see the docstring), in a store of this run's own.
    a.store = os.path.join(os.path.dirname(os.path.abspath(a.raw)), "qtune-decode.sqlite")
    a.ranking = {}
    if not a.isa:
        if os.path.exists(a.store):
            os.remove(a.store)
        for shape, _ in SHAPES:
            a.ranking[shape] = choose_decode(a, os.path.join(a.models, shape + ".bin"), a.store)
            print(f"[compare] qtune decode ranking on {shape}: {a.ranking[shape]}", file=sys.stderr)
    paths = {}  # (shape, llama path) -> llama_path()
    for shape, _ in SHAPES:
        for name, flags in LLAMA_PATHS:
            paths[(shape, name)] = llama_path(a, os.path.join(a.models, shape + ".gguf"), flags)
            print(f"[compare] llama.cpp {name} path on {shape}: {paths[(shape, name)]}", file=sys.stderr)
    results = {}  # (shape, threads) -> {"qtune": [...], "llama default": [...], "llama generic": [...]}
    sides = ["qtune"] + [f"llama {name}" for name, _ in LLAMA_PATHS]
    # Where llama.cpp's default path is its generic path (no AMX or repack buffer: the same weights and kernels),
    # it is measured once, as the generic path, and its column repeats those figures.
    same = {shape for shape, _ in SHAPES if paths[(shape, "default")] == paths[(shape, "generic")]}
    started = datetime.datetime.now(datetime.timezone.utc)
    with open(a.raw, "a") as raw:
        for rnd in range(a.rounds):
            for shape, _ in SHAPES:
                for threads in a.threads:
                    q_model = os.path.join(a.models, shape + ".bin")
                    l_model = os.path.join(a.models, shape + ".gguf")
                    shift = rnd % len(sides)
                    for side in sides[shift:] + sides[:shift]:
                        if side == "llama default" and shape in same:
                            continue
                        print(f"[compare] round {rnd + 1}/{a.rounds} {shape} {threads}t {side}", file=sys.stderr, flush=True)
                        if side == "qtune":
                            r = qtune_round(a, q_model, threads)
                        else:
                            r = llama_round(a, l_model, threads, dict(LLAMA_PATHS)[side.split()[1]])
                        results.setdefault((shape, threads), {}).setdefault(side, []).append(r)
                        raw.write(json.dumps({"round": rnd, "shape": shape, "threads": threads, "side": side, **r}) + "\n")
                        raw.flush()
    for shape in same:
        for threads in a.threads:
            v = results.get((shape, threads))
            if v and "llama generic" in v:
                v["llama default"] = v["llama generic"]
    finished = datetime.datetime.now(datetime.timezone.utc)
    write_report(a, cpu, paths, results, started, finished, same)


def write_report(a, cpu, paths, results, started, finished, same=()):
    some = next(iter(results.values()))
    llama_build = some["llama default"][0]["build"]
    loads = [l for v in results.values() for side in v.values() for r in side for pair in r["load"] for l in pair]
    L = []
    L.append("# CPU runtime vs llama.cpp, side by side")
    L.append("")
    L.append(f"Written by `scripts/peers/cpu_vs_llama_cpp.sh` ({started:%d %b %Y %H:%M}–{finished:%H:%M} UTC). "
             f"qtune `{a.qtune_rev}` (qbench, fast path); llama.cpp as vendored in PyPI's llama-cpp-python "
             f"{a.llama_version}, `{llama_build}`, llama-bench built CPU-only with "
             f"{'GGML_NATIVE' if not a.isa else '`' + a.llama_arch + '`'} by {a.llama_compiler}.")
    L.append("")
    feats = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in cpu["features"].items())
    L.append(f"**Machine.** {cpu['model']}, {os.cpu_count()} CPUs seen; caches (per cpu0's sysfs) "
             f"{', '.join(cpu['caches']) or 'unknown'}; ISA: {feats}.")
    L.append("")
    # Held to one instruction set, neither tool runs tiles, whatever the CPU has.
    amx = cpu["amx"] and not a.isa
    if a.isa:
        L.append(f"**Both tools are held to {a.isa}** on this CPU, to stand for a CPU that has that set and no more: "
                 f"`qbench --isa {a.isa}`, and llama-bench built without GGML_NATIVE for that set alone (above). "
                 "Neither runs AMX or AVX-512, so the prefill goal is the issue's 2× for a CPU without AMX. The clock, "
                 "caches and memory are this CPU's, not those of a CPU that has only that set.")
    elif cpu["amx"]:
        llama_amx = all(p["amx"] for (shape, name), p in paths.items() if name == "default")
        L.append("This CPU has AMX-INT8: qtune's prefill GEMM runs on AMX tiles where Linux grants them (its backend "
                 "name below says so), and llama.cpp's default path "
                 + ("ran its AMX kernels on every shape." if llama_amx else
                    "did **not** run its AMX kernels on every shape (see the paths below): its build or this kernel "
                    "refused them.")
                 + " The prefill goal is 1.5× llama.cpp's fastest path.")
    else:
        L.append("This CPU has no AMX, so neither tool can use tiles here: the goals are judged against llama.cpp's "
                 "fastest path on this machine (the prefill goal is the issue's 2× for a CPU without AMX), and "
                 "qtune's AMX path is not measured by this run.")
    L.append("")
    busy = max(loads) > (os.cpu_count() or 1) + 0.5
    neighbours = "The machine was shared with other work" if busy else "Nothing else ran beside the benchmark"
    L.append(f"{neighbours}: 1-minute load average {min(loads):.2f}–{max(loads):.2f} over the runs. The runs are "
             f"interleaved (qtune and both llama.cpp paths back to back, rotating which goes first). {a.rounds} "
             f"rounds; values are medians over the rounds. \"Fastest\" is llama.cpp's better path in each round "
             f"(its smaller peak RSS); ratios are qtune / that, of the medians, with the range of the per-round "
             f"ratios beside them.")
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
    if getattr(a, "ranking", None):
        L.append("qtune's decode variant was ranked on this CPU before the rounds, as its README tells a user to "
                 "(`qbench --model M --choose-decode --prompt 1 --gen 32 --repeat 5 --tuned-cache S`: the Q8_0 "
                 "decode with its software prefetch into L2, without it, and into L1, alternated; all threads), and every "
                 "qbench run was "
                 "given that store. The ranking it printed:")
        L.append("")
        for shape, title in SHAPES:
            L.append(f"- {title}: " + "; ".join(f"`{' '.join(l.split())}`" for l in a.ranking.get(shape, [])
                                               if not l.startswith("stored in")))
        L.append("")
    else:
        L.append("Held to one instruction set, qtune ran its built-in decode variant (the prefetch on): its "
                 "`qbench --choose-decode` ranks the ISA qrun would run.")
        L.append("")
    L.append("llama.cpp's paths, from the buffers its log names for the weights:")
    L.append("")
    for shape, title in SHAPES:
        for name, flags in LLAMA_PATHS:
            p = paths[(shape, name)]
            L.append(f"- {title}, {name} (`llama-bench {' '.join(flags) or '(no flags)'}`): {p['name']}; "
                     f"buffers {', '.join(p['buffers']) or 'none named'}.")
    if same:
        L.append("")
        L.append("Where both paths name the same buffers (" + ", ".join(t for s, t in SHAPES if s in same) + "), "
                 "the default path is the generic one: it was measured once, as the generic path, and the "
                 "default column repeats those figures.")
    L.append("")
    goals = []
    for shape, title in SHAPES:
        for threads in a.threads:
            v = results.get((shape, threads))
            if not v:
                continue
            q = v["qtune"]
            llama = {name: v[f"llama {name}"] for name, _ in LLAMA_PATHS}
            L.append(f"## {title}, {threads} thread{'s' if threads > 1 else ''}")
            L.append("")
            L.append(f"qtune: `{q[0]['backend']}` (qbench's AMX check: {q[0].get('amx') or 'not reported'}).")
            L.append("")
            heads = " | ".join(f"llama.cpp {name}" for name in llama)
            L.append(f"| measure | qtune | {heads} | qtune / fastest | per-round ratios |")
            L.append("|---|---|" + "---|" * len(llama) + "---|---|")
            ratios = {}
            for key, label, higher_better in ROWS:
                qm = statistics.median(r[key] for r in q)
                fastest = best(llama, key, higher_better)
                per = [qr[key] / f for qr, f in zip(q, fastest)]
                ratios[key] = qm / statistics.median(fastest)
                cells = " | ".join(fmt(statistics.median(r[key] for r in llama[name])) for name in llama)
                L.append(f"| {label} | {fmt(qm)} | {cells} | {ratios[key]:.2f}× | {min(per):.2f}–{max(per):.2f} |")
            roof = statistics.median(r["roofline"] for r in q)
            bw = statistics.median(r["read_gbps"] for r in q)
            L.append("")
            # The hypervisor's share of the decode's CPU time (qbench, /proc/stat): on a VM a descheduled vCPU stops
            # every thread of a step at its next join, which the best-of bandwidth loop may have been spared.
            steals = [r["steal"] for r in q if r.get("steal") is not None]
            stolen = (f" The hypervisor stole {statistics.median(steals) * 100:.1f}% of that decode's CPU time "
                      f"(median; {min(steals) * 100:.1f}-{max(steals) * 100:.1f}% over the rounds).") if steals else ""
            L.append(f"qtune's depth-0 decode reaches {roof * 100:.1f}% of the roofline (read bandwidth {bw:.1f} GB/s "
                     f"measured by qbench in the same process); KV cache {q[0]['kv']}.{stolen}")
            L.append("")
            name = f"{title}, {threads}t"
            # The prefill goal depends on the CPU: against llama.cpp's AMX path where the CPU has AMX
            # (the path names above say whether llama.cpp took it), against its generic path where it has none.
            goal_pp = GOAL_PREFILL_AMX if amx else GOAL_PREFILL_NO_AMX
            which = "llama.cpp's fastest path" + (" (AMX CPU)" if amx else
                                                  f" (held to {a.isa})" if a.isa else " (no AMX on this CPU)")
            goals.append((name, f"prefill pp512 ≥ {goal_pp}× {which}", ratios["pp"] >= goal_pp, f"{ratios['pp']:.2f}×"))
            goals.append((name, f"decode at depth 0 ≥ {GOAL_DECODE_DEPTH0}× llama.cpp's fastest path",
                          ratios["tg0"] >= GOAL_DECODE_DEPTH0, f"{ratios['tg0']:.2f}×"))
            goals.append((name, f"decode at depth 2048 ≥ {GOAL_DECODE_DEPTH2048}× llama.cpp's fastest path",
                          ratios["tg2048"] >= GOAL_DECODE_DEPTH2048, f"{ratios['tg2048']:.2f}×"))
            goals.append((name, f"decode at depth 0 ≥ {GOAL_ROOFLINE:.0%} of the read bandwidth", roof >= GOAL_ROOFLINE,
                          f"{roof * 100:.1f}%" + (f" ({statistics.median(steals) * 100:.1f}% stolen)" if steals else "")))
            goals.append((name, "peak RSS ≤ llama.cpp's (its smaller path)", ratios["rss"] <= 1.0, f"{ratios['rss']:.2f}×"))
    L.append("## Goals (issue 29)")
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
