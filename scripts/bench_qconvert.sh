#!/usr/bin/env bash
# Benchmark of `qconvert convert`: a synthetic Hugging Face checkpoint of real Qwen3 shapes (default: the
# Qwen3-0.6B shapes in fp32, 2.4 GB in 1 GB shards) converted to ajc1 and ak48. Reports wall time, input
# throughput and peak RSS (VmHWM, printed by qconvert itself and cross-checked with /usr/bin/time when
# present). Results go to stdout as a Markdown table.
#
#   bash scripts/bench_qconvert.sh                       # uses build/bin/qconvert
#   QTUNE_BUILD_DIR=build-x PRESET=qwen3-30b-a3b LAYERS=4 FORMATS=moe3 bash scripts/bench_qconvert.sh
#
# The checkpoint is generated once under $BENCH_DIR and reused; page cache is left warm (the first
# conversion reads a file the generator just wrote), which is the common case right after a download.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${QTUNE_BUILD_DIR:-$root/build}"
qconvert="$build/bin/qconvert"
preset="${PRESET:-qwen3-0.6b}"
dtype="${DTYPE:-f32}"
shard="${SHARD:-1GB}"
formats="${FORMATS:-ajc1 ak48}"
layers_flag=()
[[ -n "${LAYERS:-}" ]] && layers_flag=(--layers "$LAYERS")
work="${BENCH_DIR:-$build/bench-qconvert}"
hf="$work/hf-$preset-$dtype${LAYERS:+-L$LAYERS}"

[[ -x "$qconvert" ]] || { echo "bench_qconvert: $qconvert not built (cmake --build $build --target qconvert)" >&2; exit 2; }
mkdir -p "$work"

if [[ ! -f "$hf/config.json" ]]; then
  echo "bench_qconvert: generating $hf" >&2
  "$qconvert" synthetic --preset "$preset" "${layers_flag[@]}" --format hf --dtype "$dtype" --shard-size "$shard" \
    --seed 1 --quiet --out "$hf"
fi
input_bytes=$(du -cb "$hf"/*.safetensors | tail -1 | cut -f1)

timer=()
[[ -x /usr/bin/time ]] && timer=(/usr/bin/time -f "time: %e s wall, %U s user, %S s sys, %M KB max RSS")

# Wall time depends on what else the machine runs; CPU time (user + sys) is the steadier figure.
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores" >&2
echo "| format | input | output | wall s | CPU s (user+sys) | input MB/s (wall) | input MB/s (CPU) | peak RSS (qconvert VmHWM) | max RSS (/usr/bin/time) |"
echo "|---|---|---|---|---|---|---|---|---|"
for fmt in $formats; do
  out="$work/model.$fmt"
  extra=()
  [[ "$fmt" == moe3 ]] && extra=(--expert-type "${EXPERT_TYPE:-q8_0}")
  log="$work/convert-$fmt.log"
  start=$(date +%s.%N)
  "${timer[@]}" "$qconvert" convert --hf "$hf" --format "$fmt" "${extra[@]}" --no-tokenizer --out "$out" 2> "$log"
  end=$(date +%s.%N)
  wall=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
  rate=$(awk -v n="$input_bytes" -v t="$wall" 'BEGIN { printf "%.0f", n / 1e6 / t }')
  rss=$(grep -o 'peak RSS [0-9.]* MB' "$log" | tail -1 | awk '{print $3 " MB"}')
  trss=$(grep -o '[0-9]* KB max RSS' "$log" | awk '{printf "%.1f MB", $1 * 1024 / 1e6}')
  cpu=$(grep -o '[0-9.]* s user, [0-9.]* s sys' "$log" | awk '{printf "%.2f", $1 + $4}')
  cpu_rate=$([[ -n "$cpu" ]] && awk -v n="$input_bytes" -v t="$cpu" 'BEGIN { printf "%.0f", n / 1e6 / t }')
  out_bytes=$(stat -c %s "$out")
  printf "| %s | %.2f GB | %.2f GB | %s | %s | %s | %s | %s | %s |\n" "$fmt" "$(awk -v n="$input_bytes" 'BEGIN{print n/1e9}')" \
    "$(awk -v n="$out_bytes" 'BEGIN{print n/1e9}')" "$wall" "${cpu:-n/a}" "$rate" "${cpu_rate:-n/a}" "${rss:-?}" "${trss:-n/a}"
  grep '^qconvert: wrote' "$log" >&2
  "$qconvert" info "$out" > /dev/null  # the result must open and validate
  rm -f "$out"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
