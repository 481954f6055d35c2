#!/usr/bin/env python3
"""Every loop of every function in a CUBIN (nvdisasm), innermost first, with its static instruction count by
opcode class: the per-loop view behind results/marlin-class-kernels.md (qtune profile reports only the longest
loop). Usage: sass_loops.py NVDISASM CUBIN_OR_DIRECTORY [FUNCTION_SUBSTRING] (a directory: every *.cubin in it,
e.g. qtune's NVRTC cache, each function once)."""
import os
import re
import subprocess
import sys
from collections import Counter

INT_ADDR = {"IMAD", "IADD3", "LEA", "SHF", "ISETP", "IMNMX", "SEL", "MOV", "IABS", "I2F", "F2I", "SGXT", "IMUL",
            "LEA.HI", "ULDC", "UMOV", "UIADD3", "ULEA", "USHF", "UIMAD", "S2R", "S2UR", "CS2R", "P2R", "R2P", "PLOP3"}


def opclass(op):
    base = op.split(".")[0]
    if base.startswith("U") and base not in ("UMOV",):
        return "uniform"
    if base in INT_ADDR:
        return "int_addr"
    return base


def main():
    nvdisasm, path = sys.argv[1], sys.argv[2]
    want = sys.argv[3] if len(sys.argv) > 3 else ""
    cubins = [os.path.join(path, c) for c in sorted(os.listdir(path)) if c.endswith(".cubin")] if os.path.isdir(path) else [path]
    seen = set()
    for cubin in cubins:
        text = subprocess.run([nvdisasm, "-c", "-g", cubin], capture_output=True, text=True, check=True).stdout
        for f in re.split(r"\n\s*\.text\.", text)[1:]:
            name = f.split(":", 1)[0].strip()
            if (want and want not in name) or name in seen:
                continue
            seen.add(name)
            report(name, f)


def report(name, f):
    if True:
        insts = []  # (offset, opcode, arguments)
        labels, pending = {}, []
        for line in f.splitlines():
            lm = re.match(r"\s*(\.L_x_\d+):", line)
            if lm:
                pending.append(lm.group(1))
                continue
            m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*(.*?);", line)
            if m:
                off = int(m.group(1), 16)
                for p in pending:
                    labels[p] = off
                pending = []
                insts.append((off, m.group(3), m.group(4)))
        loops = []
        for o, op, args in insts:
            if op.startswith("BRA"):
                t = re.search(r"(\.L_x_\d+)", args)
                if t and t.group(1) in labels and labels[t.group(1)] <= o:
                    loops.append((labels[t.group(1)], o))
        print(f"{name}: {len(insts)} instructions, {len(loops)} loops")
        for lo, hi in sorted(loops, key=lambda r: r[1] - r[0]):
            body = [op for o, op, _ in insts if lo <= o <= hi]
            c = Counter(opclass(op) for op in body)
            hmma = c.get("HMMA", 0)
            mix = " ".join(f"{k}={v}" for k, v in sorted(c.items()))
            print(f"  loop [{lo:#x}, {hi:#x}]: {len(body)} instructions ({len(body) - hmma} without HMMA): {mix}")


if __name__ == "__main__":
    main()
