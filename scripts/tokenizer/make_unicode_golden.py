#!/usr/bin/env python3
"""Writes tests/tokenizer/data/unicode_golden.bin.gz: Hugging Face tokenizers' ids for one probe string per
code point U+0000..U+10FFFF (surrogates skipped), plus one probe per canonical composition.

Why these probes: the pre-tokenizer's letter/number/space classes and NFC are where a Unicode version
difference shows. probe(c) = c + "'s a" + c + U+0301 + " 1" + c puts c at the start, before a contraction,
after a letter, before a combining mark (reordering) and after a digit, so a class or combining-class
difference moves a pre-token boundary. The composition probes are "x" + NFD(composite) + "'s" for every
canonical composite of Unicode 16.0 (unicodedata2 16.0.0), because HF's NFC data is older than that and
some pairs (e.g. U+11935 U+11930) stay apart there.

File (gzip): "QTUG1", varint count of code-point probes, then per probe: varint n, n zigzag varint deltas
against the previous probe's id at the same index (0 past its end). Then varint count of composition
probes, each: varint k, k varint code points, varint n, n varint ids.

    python -m venv .venv-tok && .venv-tok/bin/pip install -r scripts/tokenizer/requirements.txt unicodedata2==16.0.0
    .venv-tok/bin/python scripts/tokenizer/make_unicode_golden.py /work/shared/qwen3-tokenizer
"""
import gzip
import os
import sys

import unicodedata2
from tokenizers import Tokenizer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "tokenizer", "data", "unicode_golden.bin.gz")


def probe(cp):
    c = chr(cp)
    return c + "'s a" + c + "\u0301 1" + c


def varint(v, out):
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return


def zigzag(v):
    return (v << 1) if v >= 0 else ((-v << 1) - 1)


def main():
    if unicodedata2.unidata_version != "16.0.0":
        sys.exit(f"unicodedata2 is at Unicode {unicodedata2.unidata_version}; install unicodedata2==16.0.0")
    tok = Tokenizer.from_file(os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", "tokenizer.json"))
    cps = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    out = bytearray(b"QTUG1")
    varint(len(cps), out)
    prev = []
    batch = 20000
    for start in range(0, len(cps), batch):
        chunk = cps[start:start + batch]
        for enc in tok.encode_batch([probe(cp) for cp in chunk], add_special_tokens=False):
            ids = enc.ids
            varint(len(ids), out)
            for i, v in enumerate(ids):
                varint(zigzag(v - (prev[i] if i < len(prev) else 0)), out)
            prev = ids
    composites = []
    for cp in cps:
        d = unicodedata2.normalize("NFD", chr(cp))
        if d != chr(cp) and unicodedata2.normalize("NFC", d) == chr(cp):
            composites.append(d)
    varint(len(composites), out)
    for d in composites:
        s = "x" + d + "'s"
        varint(len(s), out)
        for ch in s:
            varint(ord(ch), out)
        ids = tok.encode(s, add_special_tokens=False).ids
        varint(len(ids), out)
        for v in ids:
            varint(v, out)
    with gzip.GzipFile(OUT, "wb", compresslevel=9, mtime=0) as f:
        f.write(bytes(out))
    print(f"{len(cps)} code-point probes, {len(composites)} composition probes, {len(out)} bytes -> "
          f"{os.path.getsize(OUT)} bytes gzip: {OUT}")


if __name__ == "__main__":
    main()
