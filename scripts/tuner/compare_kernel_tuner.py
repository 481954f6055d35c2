#!/usr/bin/env python3
"""Search efficiency on the recorded A100/A4000 spaces: qtune's strategies (`qtune replay`) beside Kernel
Tuner's strategies in simulation mode (`kernel_tuner.tune_cache`), same spaces, same budget in distinct
evaluations. Metric: optimum time / best time found (1.0 = the optimum), median over seeds, at the budget
and along the way (curves). Writes results/tuner-search-efficiency.md and a JSON with every curve.

  .venv-tuner/bin/python scripts/tuner/compare_kernel_tuner.py --qtune build/bin/qtune \
      [--seeds 50] [--kt-seeds 20] [--bo-seeds 3] [--budget 5%] [--jobs 2]

Kernel Tuner counts a configuration once however often a strategy revisits it (its cache), so each KT run's
evaluation order is reduced to first visits and cut at the budget, exactly as qtune's loop does.
"""
import argparse
import gzip
import json
import math
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPACES = ["convolution_milo_A100", "convolution_milo_A4000", "dedispersion_milo_A100", "dedispersion_milo_A4000"]
QTUNE_STRATEGIES = ["genetic", "ils", "annealing", "bandit", "random"]
# The default set; firefly_algorithm, greedy_mls and basinhopping also run (--kt-strategies) but cost several
# times more per run on this machine.
KT_STRATEGIES = ["random_sample", "genetic_algorithm", "simulated_annealing", "greedy_ils", "mls", "diff_evo", "pso",
                 "dual_annealing", "bayes_opt"]
CURVE_POINTS = 20


def checkpoints(budget):
    marks = []
    for i in range(1, CURVE_POINTS + 1):
        m = max(1, round(budget * i / CURVE_POINTS))
        if not marks or m > marks[-1]:
            marks.append(m)
    return marks


def kt_run(args):
    path, strategy, budget, seed, optimum = args
    warnings.filterwarnings("ignore")
    from kernel_tuner.interface import tune_cache
    import io, contextlib
    with contextlib.redirect_stdout(io.StringIO()):
        res, _ = tune_cache(path, strategy=strategy, strategy_options={"max_fevals": budget}, verbose=False,
                            quiet=True, seed=seed)
    keys = None
    seen, best, trace = set(), math.inf, []
    for r in res:
        if keys is None:
            keys = [k for k in r if k not in ("time", "times", "compile_time", "verification_time", "benchmark_time",
                                               "framework_time", "strategy_time", "timestamp", "GFLOP/s", "GB/s")]
        k = tuple(r[x] for x in keys)
        if k in seen:
            continue
        seen.add(k)
        t = r.get("time")
        if isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0 and t < 1e20:
            best = min(best, float(t))
        trace.append(best)
        if len(trace) >= budget:
            break
    return [optimum / b if b < math.inf else 0.0 for b in trace]


def curve_from_traces(traces, budget):
    out = []
    for m in checkpoints(budget):
        vals = [t[min(m, len(t)) - 1] if t else 0.0 for t in traces]
        out.append([m, statistics.median(vals)])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qtune", default=os.path.join(ROOT, "build", "bin", "qtune"))
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--kt-seeds", type=int, default=10)
    ap.add_argument("--bo-seeds", type=int, default=2, help="seeds for bayes_opt (1-5 minutes per run here)")
    ap.add_argument("--budget", default="5%")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--kt-strategies", default=",".join(KT_STRATEGIES))
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "tuner-search-efficiency.md"))
    ap.add_argument("--spaces", default=",".join(SPACES), help="comma-separated subset of the recorded spaces")
    ap.add_argument("--from-json", nargs="+", help="only rewrite the table from JSONs this script wrote (merged)")
    args = ap.parse_args()
    kt_strats = [s for s in args.kt_strategies.split(",") if s]
    if args.from_json:
        merged = {}
        for path in args.from_json:
            with open(path) as f:
                saved = json.load(f)
            for k, v in saved.get("args", {}).items():
                setattr(args, k, v)
            merged.update(saved["results"])
        merged = {n: merged[n] for n in SPACES if n in merged}
        save(args, merged, kt_strats)
        return

    results = {}
    tmp = tempfile.mkdtemp(prefix="qtune-kt-")
    try:
        for name in [x for x in args.spaces.split(",") if x]:
            if name not in SPACES:
                sys.exit(f"unknown space {name}; known: {', '.join(SPACES)}")
            src = os.path.join(ROOT, "tuner", "spaces", name + ".json.gz")
            doc = json.load(gzip.open(src))
            size = len(doc["cache"])
            optimum = min(e["time"] for e in doc["cache"].values() if isinstance(e["time"], (int, float)))
            budget = max(1, round(float(args.budget[:-1]) / 100 * size)) if args.budget.endswith("%") else int(args.budget)
            plain = os.path.join(tmp, name + ".json")
            with open(plain, "w") as f:
                json.dump(doc, f)
            entry = {"space_size": size, "budget_evals": budget, "optimum_ms": optimum, "strategies": {}}
            for s in QTUNE_STRATEGIES:
                t0 = time.time()
                out = subprocess.run([args.qtune, "replay", "--space", src, "--strategy", s, "--budget", str(budget),
                                      "--seeds", str(args.seeds), "--json"], check=True, capture_output=True, text=True)
                j = json.loads(out.stdout)
                entry["strategies"]["qtune:" + s] = {"median": j["median_fraction_of_optimum"], "curve": j["curve"],
                                                    "seeds": args.seeds, "seconds": time.time() - t0}
                print(f"{name} qtune:{s} {j['median_fraction_of_optimum']:.4f}", flush=True)
            for s in kt_strats:
                seeds = args.bo_seeds if s == "bayes_opt" else args.kt_seeds
                t0 = time.time()
                try:
                    with mp.Pool(args.jobs) as pool:
                        traces = pool.map(kt_run, [(plain, s, budget, seed, optimum) for seed in range(1, seeds + 1)])
                    curve = curve_from_traces(traces, budget)
                    med = statistics.median([t[-1] if t else 0.0 for t in traces])
                    entry["strategies"]["kt:" + s] = {"median": med, "curve": curve, "seeds": seeds,
                                                     "seconds": time.time() - t0}
                    print(f"{name} kt:{s} {med:.4f} ({time.time() - t0:.0f} s)", flush=True)
                except Exception as e:  # a strategy that fails on a space is reported, not fatal
                    entry["strategies"]["kt:" + s] = {"error": repr(e)[:200], "seeds": seeds}
                    print(f"{name} kt:{s} failed: {e!r}", flush=True)
            results[name] = entry
            save(args, results, kt_strats)  # after every space, so a long run leaves partial results
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def save(args, results, kt_strats):
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump({"budget": args.budget, "args": {k: getattr(args, k) for k in ("seeds", "kt_seeds", "bo_seeds", "budget")},
                   "results": results}, f, indent=1)
    write_markdown(args, results, kt_strats)


def fmt(v):
    return f"{v:.3f}"


def write_markdown(args, results, kt_strats):
    names = ["qtune:" + s for s in QTUNE_STRATEGIES] + ["kt:" + s for s in kt_strats]
    lines = ["# Search efficiency on recorded GPU spaces: qtune vs Kernel Tuner", "",
             "Spaces: the FAIR benchmark hub's brute-forced convolution and dedispersion spaces (A100-PCIE-40GB, RTX",
             "A4000; Kernel Tuner cache format, MIT licence), committed slimmed under tuner/spaces/. Metric: optimum",
             "time / best time found within the budget (1.000 = the optimum itself), median over seeds. Budget: "
             f"{args.budget} of each space in distinct evaluations (failures count). qtune: `qtune replay` "
             f"({args.seeds} seeds); Kernel Tuner 1.5.0 `tune_cache` simulation mode ({args.kt_seeds} seeds, "
             f"bayes_opt {args.bo_seeds}: it takes 1-2 minutes per run here). qtune's `best` is `genetic`.", "",
             "Reproduce:", "", "```",
             "cmake --build build --target qtune",
             "python3 -m venv .venv-tuner && .venv-tuner/bin/pip install -r scripts/tuner/requirements.txt",
             f".venv-tuner/bin/python scripts/tuner/compare_kernel_tuner.py --qtune build/bin/qtune --seeds {args.seeds} "
             f"--kt-seeds {args.kt_seeds} --bo-seeds {args.bo_seeds} --budget {args.budget}",
             "# one space, one strategy, with curve and random baseline:",
             "build/bin/qtune replay --space tuner/spaces/convolution_milo_A100.json.gz --strategy best --budget 5% --seeds 50 --json",
             "```", "", "## Median fraction of the optimum at the budget", ""]
    hdr = "| strategy | " + " | ".join(f"{n} ({results[n]['budget_evals']}/{results[n]['space_size']})" for n in results) + " |"
    lines += [hdr, "|---" * (len(results) + 1) + "|"]
    for s in names:
        row = [s]
        for n in results:
            e = results[n]["strategies"].get(s, {})
            row.append(fmt(e["median"]) if "median" in e else "error")
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Goal (>= 0.95 of the optimum, median over >= 50 seeds, within 5% of the space):", ""]
    for s in ["qtune:" + x for x in QTUNE_STRATEGIES]:
        vals = [results[n]["strategies"].get(s, {}).get("median", 0.0) for n in results]
        ok = all(v >= 0.95 for v in vals)
        lines.append(f"* {s}: worst space {min(vals):.3f} -> {'met' if ok else 'not met'}")
    best_kt = max(("kt:" + x for x in kt_strats),
                  key=lambda s: min(results[n]["strategies"].get(s, {}).get("median", 0.0) for n in results))
    lines.append(f"* best Kernel Tuner strategy by its worst space: {best_kt}, worst space "
                 f"{min(results[n]['strategies'].get(best_kt, {}).get('median', 0.0) for n in results):.3f}")
    lines += ["", "Notes: Kernel Tuner's medians rest on fewer seeds than qtune's, so they are noisier: random sampling is",
              "the same algorithm in both (compare qtune:random with kt:random_sample). The curves show where the",
              "strategies differ most: before the budget is spent. Kernel Tuner's pyatf_strategies (the AUC bandit) could",
              "not run (Kernel Tuner 1.5.0 and pyatf 0.0.13 disagree on pyatf's TP() signature)."]
    lines += ["", "## Curves (median fraction of the optimum after k evaluations)", ""]
    for n in results:
        marks = checkpoints(results[n]["budget_evals"])
        show = [i for i in range(len(marks)) if i % 2 == 1]
        lines += [f"### {n}", "", "| strategy | " + " | ".join(str(marks[i]) for i in show) + " |",
                  "|---" * (len(show) + 1) + "|"]
        for s in names:
            e = results[n]["strategies"].get(s, {})
            if "curve" not in e:
                continue
            lines.append("| " + s + " | " + " | ".join(fmt(e["curve"][i][1]) for i in show if i < len(e["curve"])) + " |")
        lines.append("")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
