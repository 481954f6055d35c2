#!/usr/bin/env python3
"""What a kernel's main loop waits for: each instruction of the innermost loop with the most HMMA (or the
address range given) beside its control fields, decoded from nvdisasm -hex (Volta and later: stall cycles, the
scoreboard a variable-latency instruction writes and the scoreboards an instruction waits on). A wait on a
scoreboard waits until no instruction that writes it is outstanding, so where every load of a register ring
writes one scoreboard, the first use of any slot waits for the whole ring. The summary counts, per scoreboard,
the global loads that write it and the instructions that wait on it, and lists the counted waits (DEPBAR.LE)
that wait for the oldest of a scoreboard's operations only.

Usage: sass_scoreboards.py NVDISASM CUBIN FUNCTION_SUBSTRING [START END] (hex addresses)
Control bits (the high 64-bit word of each 128-bit instruction): stall [41:45), yield 45, write scoreboard
[46:49), read scoreboard [49:52), wait mask [52:58) (7 = none for the two indices). Source: the public
microbenchmark papers on Volta/Turing SASS encoding (Jia et al., "Dissecting the NVIDIA Volta GPU Architecture
via Microbenchmarking", 2018), the layout nvdisasm's own listings agree with.
"""
import re
import subprocess
import sys
from collections import Counter

INST = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*/\* (0x[0-9a-f]{16}) \*/")
HIGH = re.compile(r"/\* (0x[0-9a-f]{16}) \*/")


def functions(listing):
    """{name: [(offset, text, high word)]} from nvdisasm -hex output."""
    out, name, lines = {}, None, listing.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"\s*\.text\.(\S+):", lines[i])
        if m:
            name = m.group(1)
            out[name] = []
        m = INST.match(lines[i])
        if m and name and i + 1 < len(lines):
            h = HIGH.search(lines[i + 1])
            if h:
                out[name].append((int(m.group(1), 16), m.group(2), int(h.group(1), 16)))
                i += 2
                continue
        i += 1
    return out


def opcode(text):
    """The opcode of an instruction's text, past its predicate."""
    parts = text.split()
    return parts[1] if parts[0].startswith("@") else parts[0]


def main():
    if len(sys.argv) not in (4, 6):
        sys.exit(__doc__)
    nvdisasm, cubin, want = sys.argv[1:4]
    listing = subprocess.run([nvdisasm, "-hex", "-c", cubin], capture_output=True, text=True, check=True).stdout
    raw = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True, check=True).stdout
    fns = {n: f for n, f in functions(listing).items() if want in n}
    if not fns:
        sys.exit(f"no function matching '{want}' in {cubin}")
    for name, insts in fns.items():
        if len(sys.argv) == 6:
            lo, hi = int(sys.argv[4], 16), int(sys.argv[5], 16)
        else:
            lo, hi = innermost_mma_loop(raw, name, insts)
        print(f"{name}: [{lo:#x}, {hi:#x}]")
        writers, waiters, counted = Counter(), Counter(), []
        for off, text, h in insts:
            if not lo <= off <= hi:
                continue
            stall, wb, rb, wm = (h >> 41) & 15, (h >> 46) & 7, (h >> 49) & 7, (h >> 52) & 63
            waits = [b for b in range(6) if wm >> b & 1]
            if wb != 7 and opcode(text).split(".")[0] == "LDG":
                writers[wb] += 1
            if opcode(text).startswith("DEPBAR"):
                counted.append(text)
            for b in waits:
                waiters[b] += 1
            print(f"  {off:05x}  stall {stall:2d}  {'W' + str(wb) if wb != 7 else '  '}  {'R' + str(rb) if rb != 7 else '  '}"
                  f"  wait {''.join(map(str, waits)) or '-':6s} {text}")
        for sb in sorted(set(writers) | set(waiters)):
            print(f"  scoreboard {sb}: written by {writers[sb]} global loads (LDG), waited on by {waiters[sb]} instructions")
        # DEPBAR.LE SBn, k waits until at most k operations on SBn are outstanding: a wait for the oldest of a
        # group that completes in order (cp.async groups), not for all of them.
        for text in sorted(set(counted)):
            print(f"  counted wait: {text} ({counted.count(text)} in the loop)")


def innermost_mma_loop(raw, name, insts):
    """The shortest backward-branch range holding the most HMMA/HGMMA instructions."""
    offs = [o for o, _, _ in insts]
    targets = {}
    for line in raw.split(f".text.{name}:", 1)[1].splitlines():
        m = re.match(r"\s*(\.L_x_\d+):", line)
        if m:
            targets[m.group(1)] = None
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/", line)
        if m:
            for k, v in targets.items():
                if v is None:
                    targets[k] = int(m.group(1), 16)
        if re.match(r"\s*\.text\.", line) or line.strip().startswith(".section"):
            break
    best = None
    for off, text, _ in insts:
        t = re.search(r"BRA\s+`\((\.L_x_\d+)\)", text)
        if t and targets.get(t.group(1)) is not None and targets[t.group(1)] <= off:
            start = targets[t.group(1)]
            mma = sum(1 for o, x, _ in insts if start <= o <= off and ("HMMA" in x or "HGMMA" in x))
            key = (mma, -(off - start))
            if mma and (best is None or key > best[0]):
                best = (key, start, off)
    if not best:
        return offs[0], offs[-1]
    return best[1], best[2]


if __name__ == "__main__":
    main()
