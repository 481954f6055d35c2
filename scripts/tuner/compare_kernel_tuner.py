#!/usr/bin/env python3
"""Kernel Tuner's strategies on the recorded spaces (tuner/spaces/), in its simulation mode
(`kernel_tuner.tune_cache`), at the budgets qtune's benchmark uses. Writes one JSON line per run to
results/kernel-tuner-runs.jsonl (appending; runs already there are skipped, so an interrupted sweep resumes);
scripts/tuner/search_efficiency.py puts them beside qtune's in results/tuner-search-efficiency.md.

  python3 -m venv .venv-tuner && .venv-tuner/bin/pip install -r scripts/tuner/requirements.txt
  .venv-tuner/bin/python scripts/tuner/compare_kernel_tuner.py [--seeds 10] [--bo-seeds 3] [--jobs 1]

Budgets count exactly what qtune counts. Kernel Tuner's max_fevals counts the first visit of each configuration
that is in the cache, failures included (its simulation runner adds one evaluation per first visit of a cached
entry, whether its time is a number or a failure string such as RuntimeFailedConfig); configurations outside
the cache (restricted) are not counted. qtune counts every distinct point it evaluates, recorded failures
included, and proposes only points of the space. Each run's order of first visits is cut at the budget.
A budget is floor(share x points), at least 1, as in `qtune replay`.
Strategies that only stop at max_fevals (genetic_algorithm, pso, diff_evo, greedy_ils, mls, bayes_opt: their
search does not read the budget) run once at the largest budget and are read at the smaller ones from the
same run's first visits; simulated_annealing (its schedule is scaled to max_fevals), dual_annealing (maxfun)
and random_sample (its sample size) run once per budget.
"""
import argparse
import contextlib
import gzip
import io
import json
import math
import multiprocessing as mp
import os
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPACES = ["convolution_milo_A100", "convolution_milo_A4000", "dedispersion_milo_A100", "dedispersion_milo_A4000",
          "gemm_RTX_2080_Ti", "gemm_RTX_Titan", "convolution_RTX_Titan", "pnpoly_RTX_Titan"]
STOP_ONLY = ["genetic_algorithm", "pso", "diff_evo", "greedy_ils", "mls", "bayes_opt"]
BUDGET_SHAPED = ["random_sample", "simulated_annealing", "dual_annealing"]
SHARES = [1.0, 2.0, 5.0]
TIME_FIELDS = {"time", "times", "compile_time", "verification_time", "benchmark_time", "framework_time",
               "strategy_time", "timestamp", "GFLOP/s", "GB/s"}


def budget_of(share, size):
    return max(1, int(math.floor(share / 100.0 * size + 1e-9)))


def kt_run(task):
    """One Kernel Tuner run; returns the best-so-far time (ms, inf while none) after each first visit."""
    plain, strategy, budget, seed = task
    warnings.filterwarnings("ignore")
    from kernel_tuner.interface import tune_cache
    t0 = time.time()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        res, _ = tune_cache(plain, strategy=strategy, strategy_options={"max_fevals": budget}, verbose=False,
                            quiet=True, seed=seed)
    seen, best, trace = set(), math.inf, []
    for r in res:
        key = tuple((k, str(v)) for k, v in r.items() if k not in TIME_FIELDS and not k.startswith("__"))
        if key in seen:
            continue
        seen.add(key)
        t = r.get("time")
        if isinstance(t, (int, float)) and not isinstance(t, bool) and 0 < t < 1e20:
            best = min(best, float(t))
        trace.append(best)
        if len(trace) >= budget:
            break
    return trace, time.time() - t0


def improvements(trace):
    """[[k, best_ms], ...]: after k first visits the best time became best_ms (the trace, compactly)."""
    out, last = [], math.inf
    for k, t in enumerate(trace, 1):
        if t < last:
            out.append([k, t])
            last = t
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--bo-seeds", type=int, default=3, help="seeds for bayes_opt (minutes per run on the GEMM spaces)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--spaces", default=",".join(SPACES))
    ap.add_argument("--strategies", default=",".join(STOP_ONLY + BUDGET_SHAPED))
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "kernel-tuner-runs.jsonl"))
    args = ap.parse_args()
    done = set()
    if os.path.exists(args.out):
        with open(args.out) as f:
            for line in f:
                r = json.loads(line)
                done.add((r["space"], r["strategy"], r["budget"], r["seed"]))
    tmp = tempfile.mkdtemp(prefix="qtune-kt-")
    tasks, meta = [], {}
    strategies = [s for s in args.strategies.split(",") if s]
    # Cheap strategies first so that a sweep cut short still has them on every space; bayes_opt last.
    strategies.sort(key=lambda s: s == "bayes_opt")
    for strategy in strategies:
        for name in [s for s in args.spaces.split(",") if s]:
            if name not in SPACES:
                sys.exit(f"unknown space {name}; known: {', '.join(SPACES)}")
            if name not in meta:
                doc = json.load(gzip.open(os.path.join(ROOT, "tuner", "spaces", name + ".json.gz")))
                plain = os.path.join(tmp, name + ".json")
                with open(plain, "w") as f:
                    json.dump(doc, f)
                size = len(doc["cache"])
                optimum = min(e["time"] for e in doc["cache"].values() if isinstance(e["time"], (int, float)))
                meta[name] = (plain, size, optimum)
            plain, size, optimum = meta[name]
            budgets = [budget_of(s, size) for s in SHARES] if strategy in BUDGET_SHAPED else [budget_of(max(SHARES), size)]
            seeds = args.bo_seeds if strategy == "bayes_opt" else args.seeds
            for b in budgets:
                for seed in range(1, seeds + 1):
                    if (name, strategy, b, seed) not in done:
                        tasks.append((name, strategy, b, seed, plain, size, optimum))
    print(f"{len(tasks)} Kernel Tuner runs to do ({len(done)} already in {args.out})", flush=True)
    with mp.Pool(args.jobs) as pool, open(args.out, "a") as out:
        runs = pool.imap(kt_run, [(t[4], t[1], t[2], t[3]) for t in tasks])
        for t, (trace, secs) in zip(tasks, runs):
            name, strategy, b, seed, _, size, optimum = t
            rec = {"space": name, "strategy": strategy, "budget": b, "seed": seed, "space_size": size,
                   "optimum_ms": optimum, "seconds": round(secs, 2), "evaluations": len(trace),
                   "improvements": improvements(trace)}
            out.write(json.dumps(rec) + "\n")
            out.flush()
            print(f"{name} {strategy} budget {b} seed {seed}: {len(trace)} evaluations, "
                  f"{optimum / trace[-1] if trace and trace[-1] < math.inf else 0:.4f} of the optimum, {secs:.1f} s",
                  flush=True)


if __name__ == "__main__":
    main()
