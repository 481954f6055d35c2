#!/usr/bin/env bash
# The whole GPU flow on a machine with an NVIDIA GPU, phase by phase, so that each phase fits one sitting:
#   build   configure and build (Release, benchmarks off)
#   models  synthetic Qwen3-8B-shaped AWQ (ak48) and Q8_0 (ajc1) files, and a 4-layer Qwen3-30B-A3B-shaped moe3
#   test    the gpu-labelled tests
#   tune    qtune --gpu on both models into $OUT/qtune-cache.sqlite (resumes where a killed run stopped)
#   report  qbench --device cuda --report on both models with the tuned cache
# Usage: scripts/gpu/tune_and_report.sh OUT [phase ...]   (default phases: build models test tune report)
# Knobs (environment): BUDGET (per family, shape and bucket; default 12), BUCKETS (default 1,2,4,...,4096),
# LAYERS (dense model layers; default 36), JOBS (build parallelism; default all cores).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: $0 OUT [build|models|test|tune|report ...]}
shift || true
phases=${*:-build models test tune report}
mkdir -p "$out"
models=${MODELS:-/tmp/qtune-gpu-models}
budget=${BUDGET:-12}
buckets=${BUCKETS:-1,2,4,8,16,32,64,128,256,512,1024,2048,4096}
layers=${LAYERS:-36}
jobs=${JOBS:-$(nproc)}
bin=build/bin
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$out/commands.log"; }
run() { log "+ $*"; "$@"; }

sm() { nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .; }

for phase in $phases; do
  case $phase in
    build)
      run cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUDAToolkit_ROOT=/usr/local/cuda -DQTUNE_BUILD_BENCHMARKS=OFF
      run cmake --build build -j"$jobs" ;;
    models)
      mkdir -p "$models"
      [ -f "$models/qwen3-8b.ak48" ] || run $bin/qconvert synthetic --preset qwen3-8b --layers "$layers" --format ak48 --out "$models/qwen3-8b.ak48" -q
      [ -f "$models/qwen3-8b.ajc1" ] || run $bin/qconvert synthetic --preset qwen3-8b --layers "$layers" --format ajc1 --out "$models/qwen3-8b.ajc1" -q
      [ -f "$models/qwen3-30b-a3b-L4.moe3" ] || run $bin/qconvert synthetic --preset qwen3-30b-a3b --layers 4 --format moe3 --expert-type awq --out "$models/qwen3-30b-a3b-L4.moe3" -q ;;
    test)
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv | tee "$out/gpu.csv"
      (cd build && run ctest -L gpu --output-on-failure) 2>&1 | tee "$out/gpu-tests.log" ;;
    tune)
      for m in qwen3-8b.ak48 qwen3-30b-a3b-L4.moe3; do
        run $bin/qtune --model "$models/$m" --gpu "sm$(sm)" --cache "$out/qtune-cache.sqlite" --budget "$budget" \
          --buckets "$buckets" --predequantize --quiet 2>&1 | tee "$out/qtune-${m%%.*}.log"
      done ;;
    report)
      run $bin/qbench --device cuda --model "$models/qwen3-8b.ak48" --q8-model "$models/qwen3-8b.ajc1" \
        --tuned-cache "$out/qtune-cache.sqlite" --buckets "$buckets" --report "$out/report-qwen3-8b"
      run $bin/qbench --device cuda --model "$models/qwen3-30b-a3b-L4.moe3" --tuned-cache "$out/qtune-cache.sqlite" \
        --buckets "$buckets" --report "$out/report-qwen3-30b-a3b-L4" ;;
    *) echo "unknown phase '$phase' (build, models, test, tune, report)" >&2; exit 2 ;;
  esac
done
log "done: $phases"
