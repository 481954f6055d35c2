#!/usr/bin/env bash
# Runs every parser's libFuzzer target (tests/fuzz) for a number of executions under ASan+UBSan, growing a
# scratch copy of its corpus, then merges what is new into the committed corpus (tests/fuzz/corpus/<target>)
# and prints one line per target with the executions libFuzzer reports.
#
#   CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DQTUNE_FUZZ=ON -DQTUNE_SANITIZE=ON -DQTUNE_BUILD_BENCHMARKS=OFF
#   cmake --build build-fuzz --target qtune_fuzz_chat_json ...     # the targets to run
#   RUNS=1000000 MAX_TIME=1200 bash scripts/fuzz/run_fuzzers.sh chat_json kt_cache ...
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
runs="${RUNS:-1000000}"
max_time="${MAX_TIME:-1200}"
work="${FUZZ_WORK:-/tmp/qtune-fuzz-work}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
for target in "$@"; do
  bin="$root/build-fuzz/bin/qtune_fuzz_$target"
  corpus="$root/tests/fuzz/corpus/$target"
  scratch="$work/$target"
  mkdir -p "$scratch"
  cp -n "$corpus"/* "$scratch"/ 2>/dev/null || true
  max_len=4096
  [[ "$target" == model_file || "$target" == tokenizer_json ]] && max_len=65536
  log="$work/$target.log"
  (cd "$work" && "$bin" -runs="$runs" -max_total_time="$max_time" -max_len="$max_len" -print_final_stats=1 \
      "$scratch" > "$log" 2>&1) || { echo "$target: FINDING, see $log"; continue; }
  execs=$(grep -a 'stat::number_of_executed_units' "$log" | awk '{print $2}')
  secs=$(grep -a 'Done [0-9]* runs in' "$log" | sed 's/.* in \([0-9]*\) second.*/\1/')
  # Keep the corpus small: a greedy set cover of the edges, over the committed inputs and the new ones.
  (cd "$work" && "$bin" -set_cover_merge=1 -use_counters=0 -max_len="$max_len" "$corpus" "$scratch" \
      > "$work/$target.merge.log" 2>&1) || true
  echo "$target: $execs executions in ${secs:-?} s, no finding; corpus $(ls "$corpus" | wc -l) files"
done
