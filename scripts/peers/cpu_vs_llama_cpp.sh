#!/usr/bin/env bash
# The CPU runtime side by side with llama.cpp on the same synthetic Qwen3 checkpoints, from a fresh machine:
#   1. fetches the llama-cpp-python sdist from PyPI (pip) and builds llama-bench from its vendored llama.cpp
#      (CPU only, GGML_NATIVE, with clang: see below), and a Python environment for convert_hf_to_gguf.py;
#   2. writes each shape once with `qconvert synthetic --format hf`, then converts that checkpoint to GGUF
#      Q8_0 (convert_hf_to_gguf.py) and to ajc1 / moe3 (qconvert convert);
#   3. ranks qtune's decode variants on this CPU (qbench --choose-decode, as a user would before running), then
#      runs qbench with that store and llama-bench's default and generic (--repack 0) paths interleaved
#      (compare.py) and writes results/cpu-vs-llama.cpp.md, with the CPU's model, caches and ISA features and
#      each llama.cpp path named.
# A benchmark, not a test: CI does not run it. Every step is skipped when its output already exists, so a
# second run only measures. Usage (from the repository root, after configuring build/):
#   scripts/peers/cpu_vs_llama_cpp.sh [--rounds N] [--threads "1 2"] [--out FILE] [--isa avx2|avx-vnni] [--prepare-only]
# --out names the results file (default results/cpu-vs-llama.cpp.md), so a machine of another kind (another ISA)
# gets its own file beside the others rather than replacing them.
# --isa holds both tools to one instruction set on a CPU that has more, to stand for a CPU that has only that:
# qbench --isa, and a second llama-bench built without GGML_NATIVE for that set alone (avx2: AVX2, FMA, F16C,
# BMI2; avx-vnni: the same and AVX-VNNI, as Intel's client cores from Alder Lake on have).
# Environment: QTUNE_BUILD (default build), PEERS_DIR (default $QTUNE_BUILD/peers), QBENCH (default
#   $QTUNE_BUILD/bin/qbench: point it at a copy to keep rebuilding while a run goes on),
#   LLAMA_CPP_PYTHON_VERSION (default 0.3.36), PYTHON (default python3), LLAMA_CC / LLAMA_CXX (default clang).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${QTUNE_BUILD:-$ROOT/build}
WORK=${PEERS_DIR:-$BUILD/peers}
VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
PYTHON=${PYTHON:-python3}
ROUNDS=3
THREADS="1 2"
PREPARE_ONLY=0
ISA=
OUT=$ROOT/results/cpu-vs-llama.cpp.md
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --isa) ISA=$2; shift 2 ;;
    --prepare-only) PREPARE_ONLY=1; shift ;;
    *) echo "cpu_vs_llama_cpp.sh: unknown argument '$1' (--rounds N, --threads \"1 2\", --out FILE, --isa avx2|avx-vnni, --prepare-only)" >&2; exit 2 ;;
  esac
done
# llama.cpp's instruction sets: the CPU's own (GGML_NATIVE), or one set alone (--isa).
x86_set=(-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
         -DGGML_AVX512=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF)
case "$ISA" in
  "") LLAMA_ARCH=(-DGGML_NATIVE=ON) ;;
  avx2) LLAMA_ARCH=("${x86_set[@]}" -DGGML_AVX_VNNI=OFF) ;;
  avx-vnni) LLAMA_ARCH=("${x86_set[@]}" -DGGML_AVX_VNNI=ON) ;;
  *) echo "cpu_vs_llama_cpp.sh: --isa takes avx2 or avx-vnni, not '$ISA'" >&2; exit 2 ;;
esac
mkdir -p "$WORK"
log() { echo "[peers] $*" >&2; }

# qtune's tools.
if [[ ! -x $BUILD/bin/qbench || ! -x $BUILD/bin/qconvert ]]; then
  log "building qbench and qconvert in $BUILD"
  cmake --build "$BUILD" --target qbench qconvert
fi

# llama.cpp as PyPI ships it inside llama-cpp-python.
SRC=$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp
if [[ ! -d $SRC ]]; then
  log "fetching llama-cpp-python $VERSION (sdist) with pip"
  "$PYTHON" -m pip download --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$WORK/sdist"
  tar -xzf "$WORK/sdist/llama_cpp_python-$VERSION.tar.gz" -C "$WORK"
fi
# The compiler. On a CPU with AMX, llama.cpp's default path repacks Q8_0 weights for its AMX kernels, and their
# first ldtilecfg faults when GCC 12 (Debian 12's) builds them: GCC 12's _tile_loadconfig tells the compiler that
# the instruction reads 8 of the configuration's 64 bytes, so at -O3 it drops the stores to the other 56.
# clang's _tile_loadconfig is a builtin that reads all 64, so llama.cpp is built with Debian's clang, on every
# CPU, so that its default path runs wherever this script does (LLAMA_CC / LLAMA_CXX choose another compiler).
LLAMA_CC=${LLAMA_CC:-clang}
LLAMA_CXX=${LLAMA_CXX:-clang++}
if ! command -v "$LLAMA_CXX" > /dev/null; then
  log "installing clang (Debian's) to build llama.cpp"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends clang > /dev/null
fi
# But llama.cpp compiles its AMX kernels only where __AMX_INT8__ is defined, and clang 14 (Debian 12's), given
# -march=native on an AMX CPU, enables the AMX instructions yet spells that macro __AMXINT8__ (as it does
# __AMXTILE__ and __AMXBF16__; later clangs and GCC define both spellings). Built as it is, llama.cpp then has no
# AMX buffer at all, and its "default" path on an AMX Xeon is its generic one (seen on 30 Nov 2026: every
# tensor in CPU buffers, pp512 67 tok/s at 1 thread, against 132 once AMX was built). The minimal fix, applied
# only where the compiler enables AMX under the other spelling: define the spelling llama.cpp tests.
LLAMA_FLAGS=
native_macros=$("$LLAMA_CC" -march=native -dM -E -x c /dev/null)
for unit in TILE INT8 BF16; do
  if [[ -z $ISA ]] && grep -q "__AMX${unit}__" <<< "$native_macros" && ! grep -q "__AMX_${unit}__" <<< "$native_macros"; then
    LLAMA_FLAGS+=" -D__AMX_${unit}__=1"
  fi
done
LLAMA_BUILD=$WORK/llama-build-$(basename "$LLAMA_CXX")${ISA:+-$ISA}${LLAMA_FLAGS:+-amx-macros}
LLAMA_BENCH=$LLAMA_BUILD/bin/llama-bench
if [[ ! -x $LLAMA_BENCH ]]; then
  log "building llama-bench with $LLAMA_CXX (CPU only, ${LLAMA_ARCH[*]}, -j$(nproc))${LLAMA_FLAGS:+, with$LLAMA_FLAGS}"
  cmake -S "$SRC" -B "$LLAMA_BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$LLAMA_CC" \
    -DCMAKE_CXX_COMPILER="$LLAMA_CXX" -DCMAKE_C_FLAGS="$LLAMA_FLAGS" -DCMAKE_CXX_FLAGS="$LLAMA_FLAGS" \
    "${LLAMA_ARCH[@]}" -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF > "$LLAMA_BUILD.configure.log"
  cmake --build "$LLAMA_BUILD" --target llama-bench -j"$(nproc)" > "$LLAMA_BUILD.build.log"
fi

# convert_hf_to_gguf.py's requirements (llama.cpp's requirements-convert_hf_to_gguf.txt, from PyPI) and the
# gguf package vendored beside it.
VENV=$WORK/venv
if [[ ! -x $VENV/bin/python ]] || ! "$VENV/bin/python" -c "import torch, transformers, gguf" 2>/dev/null; then
  log "installing the converter's Python packages into $VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet "torch==2.11.0" "numpy~=2.2.6" "sentencepiece>=0.1.98,<0.3.0" \
    "transformers==4.57.6" "protobuf>=4.21.0,<5.0.0" "$SRC/gguf-py"
fi

# The same checkpoint for both sides: a synthetic Hugging Face folder (bf16, which both converters read)
# with the Qwen3 tokenizer the repository ships, converted both ways.
make_model() {  # name preset layers qtune-format
  local name=$1 preset=$2 layers=$3 format=$4 hf=$WORK/models/$1-hf
  if [[ ! -f $hf/config.json ]]; then
    log "writing the synthetic checkpoint $name"
    local extra=()
    [[ -n $layers ]] && extra=(--layers "$layers")
    "$BUILD/bin/qconvert" synthetic --preset "$preset" "${extra[@]}" --format hf --dtype bf16 --out "$hf" --quiet
    cp "$ROOT/models/tokenizers/qwen3/tokenizer.json" "$ROOT/models/tokenizers/qwen3/tokenizer_config.json" "$hf/"
  fi
  if [[ ! -f $WORK/models/$name.gguf ]]; then
    log "converting $name to GGUF Q8_0"
    "$VENV/bin/python" "$SRC/convert_hf_to_gguf.py" "$hf" --outtype q8_0 --outfile "$WORK/models/$name.gguf.tmp" \
      > "$WORK/models/$name.gguf.log" 2>&1
    mv "$WORK/models/$name.gguf.tmp" "$WORK/models/$name.gguf"
  fi
  if [[ ! -f $WORK/models/$name.bin ]]; then
    log "converting $name to $format"
    "$BUILD/bin/qconvert" convert --hf "$hf" --format "$format" --out "$WORK/models/$name.bin.tmp" --no-tokenizer --quiet
    mv "$WORK/models/$name.bin.tmp" "$WORK/models/$name.bin"
  fi
}
make_model qwen3-0.6b qwen3-0.6b "" ajc1
make_model qwen3-30b-a3b-L2 qwen3-30b-a3b 2 moe3
[[ $PREPARE_ONLY == 1 ]] && { log "prepared in $WORK"; exit 0; }

"$PYTHON" "$ROOT/scripts/peers/compare.py" --qbench "${QBENCH:-$BUILD/bin/qbench}" --llama-bench "$LLAMA_BENCH" \
  --llama-src "$SRC" --llama-version "$VERSION" --llama-compiler "$("$LLAMA_CXX" --version | head -1)${LLAMA_FLAGS:+ (with$LLAMA_FLAGS)}" --models "$WORK/models" --rounds "$ROUNDS" --threads $THREADS \
  --out "$OUT" --raw "$WORK/raw.jsonl" ${ISA:+--isa "$ISA" --llama-arch "${LLAMA_ARCH[*]}"}
