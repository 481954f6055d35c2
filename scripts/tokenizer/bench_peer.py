#!/usr/bin/env python3
"""Single-thread encode throughput: qtune's tokenizer (qtok_bench) beside Hugging Face `tokenizers` on the
same text in the same run. Prints a markdown table with MB/s and the ratio.

    .venv-tok/bin/python scripts/tokenizer/bench_peer.py --bench-bin build/bin/qtok_bench

Texts (written to --workdir, not committed):
  corpus   the golden corpus (tests/tokenizer/data/encode_corpus.bin): many scripts, emoji, combining marks,
           long whitespace runs - the adversarial case;
  natural  the corpus' hand-written multilingual sentences and code snippets shuffled into 2 MB of prose/code.
Each is measured as one document and as one document per line (HF: encode_batch with RAYON_NUM_THREADS=1).
Both sides get one warm-up pass (HF's BPE cache, qtune's pre-token cache) and report the best of --repeat.
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from tokenizers import Tokenizer  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import make_goldens  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def read_corpus_texts(path):
    with open(path, "rb") as f:
        buf = f.read()
    assert buf[:6] == b"QTKG1\n"
    pos = 6
    (count,) = struct.unpack_from("<I", buf, pos)
    pos += 4
    texts = []
    for _ in range(count):
        (flags,) = struct.unpack_from("<I", buf, pos)
        (n,) = struct.unpack_from("<I", buf, pos + 4)
        pos += 8
        texts.append(buf[pos:pos + n].decode("utf-8"))
        pos += n
        if flags & 1:
            (n,) = struct.unpack_from("<I", buf, pos)
            pos += 4 + n
        (k,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        for _ in range(k):
            while buf[pos] & 0x80:
                pos += 1
            pos += 1
    return texts


def split_lines(text):
    """Documents ending at each '\n' (only '\n', as qtok_bench splits; str.splitlines also splits on \r, \x85 ...)."""
    out, pos = [], 0
    while pos < len(text):
        nl = text.find("\n", pos)
        end = len(text) if nl < 0 else nl + 1
        out.append(text[pos:end])
        pos = end
    return out


def hf_bench(tok, text, lines, repeat):
    docs = split_lines(text) if lines else [text]
    def run():
        if lines:
            return sum(len(e.ids) for e in tok.encode_batch(docs, add_special_tokens=False))
        return len(tok.encode(text).ids)
    n_ids = run()  # warm-up
    best, best_cpu = float("inf"), float("inf")
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        run()
        best_cpu = min(best_cpu, time.process_time() - c0)
        best = min(best, time.perf_counter() - t0)
    mb = len(text.encode("utf-8")) / 1e6
    return {"impl": "hf-tokenizers", "seconds": best, "cpu_seconds": best_cpu, "ids": n_ids,
            "mb_per_s": mb / best, "mb_per_s_cpu": mb / best_cpu}


def qt_bench(binary, tokenizer, path, lines, repeat):
    cmd = [binary, "--text", path, "--tokenizer", tokenizer, "--repeat", str(repeat)] + (["--lines"] if lines else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench-bin", default=os.path.join(ROOT, "build", "bin", "qtok_bench"))
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "models", "tokenizers", "qwen3", "tokenizer.json"))
    ap.add_argument("--workdir", default=os.path.join(ROOT, "build", "tokenizer-bench"))
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)

    corpus = "\n".join(read_corpus_texts(os.path.join(ROOT, "tests", "tokenizer", "data", "encode_corpus.bin")))
    rng = random.Random(1)
    pool = make_goldens.SENTENCES + make_goldens.CODE
    parts, size = [], 0
    while size < 2_000_000:
        p = rng.choice(pool)
        parts.append(p)
        size += len(p.encode("utf-8")) + 1
    natural = "\n".join(parts)
    texts = {"corpus": corpus, "natural": natural}

    tok = Tokenizer.from_file(args.tokenizer)
    rows = []
    for name, text in texts.items():
        path = os.path.join(args.workdir, name + ".txt")
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        for lines in (False, True):
            hf = hf_bench(tok, text, lines, args.repeat)
            qt = qt_bench(args.bench_bin, args.tokenizer, path, lines, args.repeat)
            if hf["ids"] != qt["ids"]:
                print(f"warning: id counts differ on {name} (HF {hf['ids']}, qtune {qt['ids']})", file=sys.stderr)
            rows.append((name, "per line" if lines else "one document", len(text.encode("utf-8")), hf, qt))

    print("| text | mode | MB | HF MB/s (CPU time) | qtune MB/s (CPU time) | ratio (CPU) | HF MB/s (wall) | qtune MB/s (wall) | ratio (wall) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, mode, nbytes, hf, qt in rows:
        print(f"| {name} | {mode} | {nbytes / 1e6:.2f} | {hf['mb_per_s_cpu']:.2f} | {qt['mb_per_s_cpu']:.2f} | "
              f"{qt['mb_per_s_cpu'] / hf['mb_per_s_cpu']:.2f}x | {hf['mb_per_s']:.2f} | {qt['mb_per_s']:.2f} | "
              f"{qt['mb_per_s'] / hf['mb_per_s']:.2f}x |")


if __name__ == "__main__":
    main()
