#!/usr/bin/env python3
"""Writes tests/tokenizer/data/chat_number_cases.json: transformers' apply_chat_template renders of
conversations whose tool calls and tools hold numbers of every kind, and the conversations it refuses.

Each conversation is kept as JSON text, the way qtok reads it, and handed to transformers as Python's
json.loads reads it (big integers exact, NaN / Infinity accepted, 1e400 -> inf). The renders show
json.dumps' number rules (Python float repr), which the C++ template must reproduce byte for byte.

    .venv-tok/bin/python scripts/tokenizer/make_chat_number_golden.py /work/shared/qwen3-tokenizer
"""
import json
import os
import random
import struct
import sys

from transformers import AutoTokenizer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "tokenizer", "data", "chat_number_cases.json")

EDGE = ["0", "-0", "1", "-1", "0.0", "-0.0", "1.0", "1.10", "100", "1E5", "1e+5", "1e5", "1e15", "1e16", "1e17",
        "9999999999999998", "9999999999999998.0", "1e-4", "1e-5", "0.0001", "0.00001", "0.1", "0.3", "2.5",
        "123456789012345678901234567890", "-98765432109876543210987654321098765", "18446744073709551616",
        "9223372036854775808", "-9223372036854775809", "18446744073709551615", "1e400", "-1e400", "NaN",
        "Infinity", "-Infinity", "5e-324", "2.2250738585072014e-308", "1.7976931348623157e308", "1.5e300",
        "123456789.123456789", "0.000123", "1234567890123456.7", "12345678901234567.0", "3.14159e-10"]


def literals(rng, n):
    out = []
    while len(out) < n:
        kind = rng.randrange(5)
        if kind == 0:  # any finite double, written with 17 significant digits
            d = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
            if d != d or d in (float("inf"), float("-inf")):
                continue
            out.append("%.17g" % d)
        elif kind == 1:  # integral values around repr's switch at 1e16
            out.append("%d.0" % rng.randrange(10**14, 10**18))
        elif kind == 2:  # small values around the switch at 1e-4
            out.append("%.6e" % (rng.random() * 10.0 ** rng.randrange(-8, -2)))
        elif kind == 3:  # short decimals
            out.append("%d.%d" % (rng.randrange(0, 100000), rng.randrange(0, 1000)))
        else:  # integers of any width
            out.append(str(rng.randrange(-10 ** rng.randrange(1, 40), 10 ** rng.randrange(1, 40))))
    return out


def call_conv(args_json, tools_json=None):
    text = ('{"messages": [{"role": "user", "content": "compute"}, {"role": "assistant", "content": "", '
            '"tool_calls": [{"function": {"name": "f", "arguments": ' + args_json + '}}]}]')
    if tools_json:
        text += ', "tools": ' + tools_json
    return text + "}"


def main():
    tok = AutoTokenizer.from_pretrained(sys.argv[1] if len(sys.argv) > 1 else ".")
    rng = random.Random(17)
    convs = [("edge_" + str(i), call_conv('{"x": ' + lit + "}")) for i, lit in enumerate(EDGE)]
    convs.append(("edge_all_in_tools", call_conv("{}", '[{"type": "function", "function": {"name": "f", '
                                                 '"parameters": {"enum": [' + ", ".join(EDGE) + "]}}}]")))
    for b in range(4):
        convs.append((f"random_{b}", call_conv("[" + ", ".join(literals(rng, 2000)) + "]")))
    cases = []
    for name, text in convs:
        conv = json.loads(text)
        rendered = tok.apply_chat_template(conv["messages"], tools=conv.get("tools"), tokenize=False)
        cases.append({"name": name, "conversation": text, "rendered": rendered})
    refused = [
        ("empty", '{"messages": []}'),
        ("assistant_null_content_with_tool_calls", '[{"role": "user", "content": "hi"}, {"role": "assistant", '
         '"content": null, "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]}]'),
        ("assistant_without_content", '[{"role": "user", "content": "hi"}, {"role": "assistant", '
         '"tool_calls": [{"function": {"name": "f", "arguments": {}}}]}]'),
        ("user_null_content", '[{"role": "system", "content": "s"}, {"role": "user", "content": null}]'),
    ]
    errors = []
    for name, text in refused:
        conv = json.loads(text)
        msgs = conv["messages"] if isinstance(conv, dict) else conv
        try:
            tok.apply_chat_template(msgs, tokenize=False)
            sys.exit(f"{name}: transformers rendered it; expected an error")
        except Exception as e:  # what transformers raises is recorded, the C++ side must refuse too
            errors.append({"name": name, "conversation": text, "hf_error": f"{type(e).__name__}: {e}",
                           "message_index": None if name == "empty" else len(msgs) - 1})
    with open(OUT, "w") as f:
        json.dump({"renders": cases, "refused": errors}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(cases)} renders, {len(errors)} refusals -> {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()
