#!/usr/bin/env bash
# What a GPU run returned, set beside the static model, on the CPU machine after the run (no device time):
# every verified row of its tuning store and every kernel row of its reports (`qtune static --against`), and
# each model's decode timed launch by launch (`qtune static --step ... --against-launches`, from run.sh's
# launch-times phase). Writes CALIBRATION.md into the results folder: per family the rank correlation and the
# median error, per kernel the predicted and measured time a step. The model's constants are not refitted
# here; this says where they stand, and the files it reads are the next fixtures (tests/tuner/data/README.md).
#
#   bash scripts/gpu/calibrate.sh OUTDIR          # OUTDIR: what run.sh packed (SUMMARY.md, logs.tar.xz, ...),
#                                                 # or a results/gpu-*/ folder with them unpacked
#   QTUNE_BUILD_DIR=build-x bash scripts/gpu/calibrate.sh OUTDIR
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${QTUNE_BUILD_DIR:-$root/build}"
out="${1:?usage: calibrate.sh OUTDIR (the folder run.sh wrote)}"
[[ -d "$out" ]] || { echo "calibrate: $out: no such folder" >&2; exit 2; }
qtune="$build/bin/qtune"
[[ -x "$qtune" ]] || { echo "calibrate: $qtune is missing: build first (bash scripts/setup.sh)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for f in "$out"/logs.tar.xz "$out"/report-*.tar.xz; do
  [[ -f "$f" ]] && tar -xJf "$f" -C "$work"
done
# A results folder as committed (results/gpu-*/): the archives already unpacked beside the store.
for d in "$out"/logs "$out"/report-*/; do
  [[ -d "$d" && ! -e "$work/$(basename "$d")" ]] && cp -r "$d" "$work/"
done
store="$out/qtune-cache.sqlite"
md="$out/CALIBRATION.md"
status=0

# section TITLE CMD...: the command and its output into the file.
section() {
  local title="$1"
  shift
  {
    echo
    echo "## $title"
    echo
    echo '```'
    local cmd="$*"
    cmd="${cmd//$build\//build/}"
    echo "\$ ${cmd//$work\//}   # (files from the run's archives by their path inside them)"
    # The unpacked archives' temporary folder out of the output too, as out of the command above.
    "$@" 2>&1 | sed "s|$work/||g"
    local rc=${PIPESTATUS[0]}
    ((rc == 0)) || { echo "(exit $rc)"; status=1; }
    echo '```'
  } >> "$md"
}

{
  echo "# The static model against the GPU run in $(basename "$(cd "$out" && pwd)")"
  echo
  echo "Every time predicted here is a **prediction** of the static model (tuner/static/roofline.h), each set"
  echo "beside a **measurement** of the run. Written by scripts/gpu/calibrate.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)."
} > "$md"

[[ -f "$store" ]] && section "Tuning store: every verified row" "$qtune" static --against "$store"
for r in "$work"/report-*/report.json; do
  [[ -f "$r" ]] && section "Report $(basename "$(dirname "$r")"): every kernel row" "$qtune" static --against "$r"
done

# The launch-times phase's models (run.sh): the 8B AWQ model with 36 layers and the 30B-A3B one with 8, a
# 32-token prompt and 8 tokens, so the decode steps run at contexts 32-38 (predicted at 35).
fp=()
[[ -f "$store" ]] && fp=(--fingerprint-store "$store")
arch=sm90
if [[ -f "$work/logs/devices.log" ]]; then
  a=$(sed -n 's/^cuda: sm_\([0-9]*\) .*/\1/p' "$work/logs/devices.log" | head -1)
  [[ -n "$a" ]] && arch="sm$a"
fi
declare -A step_args=(
  [launch-times-8b.json]="--preset qwen3-8b --format ak48"
  [launch-times-8b-fused.json]="--preset qwen3-8b --format ak48 --fuse-norm"
  [launch-times-30b.json]="--preset qwen3-30b-a3b --format moe3 --layers 8"
)
for f in launch-times-8b.json launch-times-8b-fused.json launch-times-30b.json; do
  t="$work/logs/$f"
  [[ -f "$t" ]] || continue
  # A run whose stream GEMVs name no shared ring (the 9th template argument, RING = 1, or 2 across groups) ran the
  # register ring's defaults: the commits before 30 Nov.
  ring=()
  grep -Eq 'frag_stream_gemv_kernel<([^,>]*, ){8}[12]>' "$t" || ring=(--register-ring)
  # A run whose decode ran the frag GEMV (frag_linear_kernel) at one row preferred it to the stream GEMV where
  # nothing was tuned: the commits before 1 Dec.
  grep -q '"frag_linear_kernel<' "$t" && ring+=(--gemv-first)
  # shellcheck disable=SC2086
  section "Decode launch by launch: $f" "$qtune" static --gpu "$arch" --step decode --context 35 ${step_args[$f]} \
    ${fp[@]+"${fp[@]}"} ${ring[@]+"${ring[@]}"} --against-launches "$t"
done
echo "calibrate: $md"
exit $status
