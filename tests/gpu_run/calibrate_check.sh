#!/usr/bin/env bash
# calibrate.sh on what a GPU run returns, made here from the second H200 run's committed store and 8B report
# and a launch-times file the emulator writes: it must write CALIBRATION.md with the store's and the report's
# per-family fits and the decode step beside its launch times, and refuse a folder that does not exist.
set -euo pipefail
src="$1"
build="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
run="$src/results/gpu-h200-2026-11-27"
mkdir -p "$tmp/out" "$tmp/pack/logs"
cp "$run/qtune-cache.sqlite" "$tmp/out/"
tar -C "$run" -cJf "$tmp/out/report-qwen3-8b.tar.xz" report-qwen3-8b/report.json
"$build/bin/qrun" --device emu --model "$src/tests/golden/files/dense.ak48" --prompt-ids 1,2,3 -n 2 --temp 0 \
  --no-checks --launch-times "$tmp/pack/logs/launch-times-8b.json" > /dev/null 2>&1
echo "cuda: sm_90 NVIDIA H200 (132 SMs)" > "$tmp/pack/logs/devices.log"
tar -C "$tmp/pack" -cJf "$tmp/out/logs.tar.xz" logs
fail() {
  echo "calibrate_check: $*" >&2
  [[ -f "$tmp/out/CALIBRATION.md" ]] && head -40 "$tmp/out/CALIBRATION.md" >&2
  exit 1
}
QTUNE_BUILD_DIR="$build" bash "$src/scripts/gpu/calibrate.sh" "$tmp/out" || fail "calibrate.sh exited with $?"
md="$tmp/out/CALIBRATION.md"
[[ -f "$md" ]] || fail "no CALIBRATION.md"
grep -q '^## Tuning store: every verified row' "$md" || fail "no store section"
grep -q '^## Report report-qwen3-8b: every kernel row' "$md" || fail "no report section"
grep -q '^## Decode launch by launch: launch-times-8b.json' "$md" || fail "no launch-times section"
[[ $(grep -c 'every family' "$md") -ge 2 ]] || fail "the fits per family are missing"
grep -q '^kernels: predicted' "$md" || fail "the step's kernels were not set beside the launch times"
grep -q 'PREDICTION' "$md" || fail "the predictions are not labelled"
! grep -q '(exit [0-9]*)' "$md" || fail "a command failed: $(grep -B3 '(exit' "$md")"
rc=0
QTUNE_BUILD_DIR="$build" bash "$src/scripts/gpu/calibrate.sh" "$tmp/nonexistent" 2>"$tmp/err" || rc=$?
[[ $rc == 2 ]] || fail "a missing folder gave exit $rc, not 2"
grep -q 'no such folder' "$tmp/err" || fail "a missing folder's message: $(cat "$tmp/err")"
echo "calibrate_check: ok"
