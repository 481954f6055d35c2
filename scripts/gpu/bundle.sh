#!/usr/bin/env bash
# Builds the bundle that scripts/gpu/run.sh runs on a GPU machine that has the NVIDIA driver and the CUDA
# toolkit but no build dependencies and no network: the stripped tools, the `gpu` test binaries, the CPU
# runtime's test binary (whose AMX cases need the host's tiles, which no CI machine of ours has), what they
# read at run time (kernels_src/, the Qwen3 tokenizer, the golden models and logits, test data), the
# shared libraries they link that such a machine lacks, and run.sh itself. Everything is found through
# QTUNE_HOME / QTUNE_BUILD, so the bundle runs from any directory.
#
#   bash scripts/gpu/bundle.sh [OUT.tar.xz]      # default: build/qtune-gpu-bundle.tar.xz
#   QTUNE_BUILD_DIR=build-x bash scripts/gpu/bundle.sh
#
# Prints the bundle's path and size. The bundle travels inside a working tree of at most 64 MiB (the device
# machine's limit), so it must stay small: the script fails above 20 MB.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${QTUNE_BUILD_DIR:-$root/build}"
out="${1:-$build/qtune-gpu-bundle.tar.xz}"
limit_bytes=$((20 * 1000 * 1000))

for tool in qtune qrun qbench qconvert qtok; do
  [[ -x "$build/bin/$tool" ]] || { echo "bundle: $build/bin/$tool is missing: build first (bash scripts/setup.sh)" >&2; exit 2; }
done
command -v strip >/dev/null || { echo "bundle: needs strip (binutils)" >&2; exit 2; }

# The `gpu`-labelled test executables, by their CTest names ("<binary>: <test case>").
mapfile -t gpu_tests < <(cd "$build" && ctest -N -L '^gpu$' | sed -n 's/^ *Test *#[0-9]*: \([A-Za-z0-9_]*\):.*/\1/p' | sort -u)
((${#gpu_tests[@]})) || { echo "bundle: ctest lists no gpu-labelled test in $build" >&2; exit 2; }

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
b="$stage/qtune"
mkdir -p "$b/bin" "$b/tests" "$b/cpu-tests" "$b/lib" "$b/scripts/gpu"
for tool in qtune qrun qbench qconvert qtok; do strip -o "$b/bin/$tool" "$build/bin/$tool"; done
for t in "${gpu_tests[@]}"; do strip -o "$b/tests/$t" "$build/tests/$t"; done
# Apart from tests/, which run.sh runs whole with skips as failures: run.sh runs only its [amx] cases.
strip -o "$b/cpu-tests/test_runtime" "$build/tests/test_runtime"

# Shared libraries: everything the binaries link except the C and C++ runtimes (every machine that runs the CUDA
# toolkit has them, and a copy newer than its glibc would not load) and CUDA's own (the machine's toolkit).
while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*|libgcc_s.so.*|libstdc++.so.*) ;;
    libnvrtc*|libcuda.so*|libcublas*|libcudart*) ;;
    *) cp -L "$lib" "$b/lib/" ;;
  esac
done < <(for f in "$b"/bin/* "$b"/tests/* "$b"/cpu-tests/*; do ldd "$f"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)

# What the tools and tests read at run time, under QTUNE_HOME.
copy() { mkdir -p "$b/$(dirname "$1")" && cp -r "$root/$1" "$b/$1"; }
copy kernels_src
copy common/half.h  # the emulator's half arithmetic (kernels_src/common/emu_half.h) includes it
copy models/tokenizers/qwen3
copy tests/golden/files
copy tests/golden/logits
copy tests/golden/manifest.json
copy tests/emu/kernels
copy tests/report/data
cp "$root/scripts/gpu/run.sh" "$b/scripts/gpu/run.sh"
copy scripts/gpu/experiments
copy scripts/gpu/profile
# Where it came from, for the results' provenance.
{
  echo "commit $(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm), $(c++ --version | head -1)"
  echo "gpu tests: ${gpu_tests[*]}"
  echo "libraries: $(ls "$b/lib" | tr '\n' ' ')"
} > "$b/BUNDLE"

mkdir -p "$(dirname "$out")"
(cd "$stage" && tar -cf - qtune | xz -T2 -6 > "$out.partial")
mv "$out.partial" "$out"
size=$(stat -c %s "$out")
echo "bundle: $out, $((size / 1000)) kB (limit $((limit_bytes / 1000)) kB)"
if ((size > limit_bytes)); then
  echo "bundle: $out is larger than 20 MB" >&2
  exit 1
fi
