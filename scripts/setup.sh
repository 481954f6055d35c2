#!/usr/bin/env bash
# Installs qtune's Debian dependencies (only those missing), builds every tool into build/, and creates the
# small default model that `qrun` uses when no --model is given. Safe to run again: each step is skipped
# when its result is already there and up to date.
#
#   bash scripts/setup.sh            # deps + build + default model
#   QTUNE_BUILD_DIR=build-x QTUNE_CMAKE_ARGS="-DQTUNE_SANITIZE=ON" bash scripts/setup.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${QTUNE_BUILD_DIR:-$root/build}"
jobs="${QTUNE_JOBS:-$(nproc)}"

packages=(build-essential cmake ninja-build pkg-config git python3
          catch2 libbenchmark-dev nlohmann-json3-dev libsqlite3-dev sqlite3 libutf8proc-dev libpcre2-dev zlib1g-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cuda_home="${CUDA_HOME:-/usr/local/cuda}"
if [[ ! -f "$cuda_home/include/nvrtc.h" ]]; then
  echo "setup: the CUDA toolkit (nvrtc.h) was not found under $cuda_home; set CUDA_HOME" >&2
  exit 2
fi

# shellcheck disable=SC2086
cmake -S "$root" -B "$build" -G Ninja -DCUDAToolkit_ROOT="$cuda_home" ${QTUNE_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j "$jobs" ${QTUNE_BUILD_TARGETS:+--target $QTUNE_BUILD_TARGETS}

# The default model: a deterministic synthetic Qwen3 (random weights, real tokenizer) small enough to
# create in seconds on any machine. Rebuilt only when missing or when qconvert changed.
model_dir="$build/default-model"
model="$model_dir/qwen3-default.bin"
if [[ -x "$build/bin/qconvert" && ( ! -f "$model" || "$build/bin/qconvert" -nt "$model" ) ]]; then
  mkdir -p "$model_dir"
  "$build/bin/qconvert" synthetic --preset default --format ajc1 --seed 1 --out "$model"
  cp "$root/models/tokenizers/qwen3/tokenizer.json" "$root/models/tokenizers/qwen3/tokenizer_config.json" "$model_dir/"
fi
echo "setup: done (tools in $build/bin, default model $model)" >&2
