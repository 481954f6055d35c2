#!/usr/bin/env python3
"""Writes tests/tokenizer/data/split_special_cases.json: HF tokenizers' ids with split_special_tokens=True
(Tokenizer.encode_special_tokens = True), which qtok's --no-added-tokens / EncodeOptions::parse_added_tokens
= false must reproduce: special added tokens become plain text, non-special ones (<think>) still match.

    .venv-tok/bin/python scripts/tokenizer/make_split_special_golden.py /work/shared/qwen3-tokenizer
"""
import json
import os
import sys

from tokenizers import Tokenizer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "tokenizer", "data", "split_special_cases.json")

TEXTS = [
    "<think>hi</think>",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
    "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
    "<tool_response>ok</tool_response><|endoftext|>",
    "a<|endoftext|>b<think>c",
    " <|im_end|> x <think> y",
    "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>",
    "<|repo_name|>qtune<|file_sep|>main.cpp",
    "<|vision_start|><|image_pad|><|vision_end|><|box_start|>",
    "<<think>>",
    "<|im_start|><think></think><|im_end|>",
    "plain text with no tokens",
]


def main():
    tok = Tokenizer.from_file(os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", "tokenizer.json"))
    tok.encode_special_tokens = True
    cases = [{"text": t, "ids": tok.encode(t, add_special_tokens=False).ids} for t in TEXTS]
    with open(OUT, "w") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(cases)} cases -> {OUT}")


if __name__ == "__main__":
    main()
