#!/usr/bin/env bash
# The GPU run, from a bundle made by scripts/gpu/bundle.sh, on a machine that needs only the NVIDIA driver and
# the CUDA toolkit (NVRTC, cuBLASLt). Phase by phase, each under its own time limit:
#   selfcheck  the tuning flow and a tuned decode on the emulator (the only phase on a machine without a GPU;
#              with one, only when SELFCHECK=1, since the GPU phases exercise the same flow for real)
#   tests      the `gpu` test binaries with QTUNE_REQUIRE_GPU=1, so a test that would skip fails instead
#   cpu-amx    the host CPU's AMX tiles, which no CI machine of ours has, while the models are still being
#              written (the last run waited 87 s for them after the tests): the CPU runtime's [amx] tests (the AMX
#              GEMM's int32 sums against the VNNI path's on the hardware; they skip, visibly, on a host without
#              AMX), then qbench on a Qwen3-0.6B-shaped Q8_0 model (written with the others) with AMX tiles and
#              without, at one thread and at half the cores (the conversions have the rest)
#   experiments  the points scripts/gpu/experiments/smNN.json lists for this GPU's architecture (qtune --points:
#              each settles a question the last run left), into the store, while the models are still being
#              written; skipped where no file names the architecture
#   profile    the decode step's GEMVs and attention at their default points, one launch each under Nsight Compute
#              (scripts/gpu/profile/smNN.txt: stall reasons, occupancy, DRAM throughput), with each kernel's SASS
#              listing: why they reach a third of the bandwidth or less, which timings alone could not say
#   models     synthetic checkpoints: Qwen3-8B-shaped with 36 layers as ak48 (AWQ) and ajc1 (Q8_0), and
#              Qwen3-30B-A3B-shaped with 8 layers as moe3. qconvert writes them on one core each (about 2 minutes
#              for the largest on a 2-core CI machine), so the three start together in the background before
#              the tests and this phase waits for them (and a Qwen3-0.6B-shaped ajc1 for cpu-amx)
#   report-8b  qbench --device cuda --report on the 8B models, untuned: every family at its default point, the
#              runtime's default routes, attention decode at 4K and 32K, a launch's own cost (stream, graph,
#              PDL), end to end with and without programmatic dependent launch, with the decode norms fused and
#              without the graph (first, since these decide the defaults and calibrate the step model)
#   fused-8b   qrun on the 8B AWQ model, 48 greedy tokens, plain, with --fuse-norm (and --pdl on sm_90) and by
#              default (its trial of the two on the first decode steps): the same tokens at the real sizes, and
#              each statistics line
#   decode-8b  qbench --choose-decode on the 8B AWQ model: the decode step plain, with fused norms, with PDL and
#              both, ranked into the store (what qrun given it runs on this GPU); decode-30b, after the MoE
#              report, the same for the MoE model
#   launch-times  qrun --launch-times on the 8B AWQ model (default and --fuse-norm) and the MoE model, 8 greedy
#              tokens each: every launch of every step between two events, no graph, into logs/launch-times-*.json;
#              `qtune static --step ... --against-launches FILE` then sets the step model beside it kernel by kernel
#   tune-30b   sm_90 only: qtune on the MoE model's grouped GEMMs in the frag layout and its routed expert
#              GEMVs, into the store the MoE report reads
#   report-30b qbench --device cuda --report on the MoE model with that store (its buckets hold 512 and
#              4096 tokens, where its grouped expert GEMMs are judged)
#   tune       qtune --gpu on the 8B AWQ model with the default families and budget, at the report's batch
#              buckets (resumable: a time limit stops it where it is); after both reports, since the last
#              run showed the loop closes and its points now calibrate the static model
#   moe-frag   qrun on the MoE model, a 512-token prompt and 64 greedy tokens, with the experts as stored and
#              in the frag layout on the Hopper grouped GEMMs (sm_90 only): both statistics lines and tokens
# After every phase the results are packed again into OUTDIR, at most 8 files of under 16 MB each, so a run
# cut short still returns what it did: SUMMARY.md (phases, times, commands, the key lines), logs.tar.xz,
# qtune-cache.sqlite and one report-*.tar.xz per model.
#
#   bash run.sh BUNDLE.tar.xz OUTDIR
#   WORK=build/gpu-work bash run.sh BUNDLE.tar.xz OUTDIR   # resumable: run it again to go on
# With WORK set, a second call on the same machine (the device tool keeps it warm for 30 s after a call, and
# keeps ignored folders such as build/) goes on where the first stopped: the bundle is not unpacked again when
# it is the same file, models already written are kept, phases that passed are skipped, and SUMMARY.md grows.
# So the device time the first call's limit leaves over is not lost: a second, shorter call (RUN_S) uses it.
# Knobs: CUDA_HOME (default /usr/local/cuda), WORK (where the bundle is unpacked; default a fresh temporary
# folder), LAYERS (36), RUN_S (575: the whole run's limit, so it ends inside the device tool's 10-minute call;
# every phase's limit is cut to what is left of it) and each phase's own limit in seconds: SELFCHECK_S (300),
# TESTS_S (120), EXPERIMENTS_S (105), PROFILE_S (60), MODELS_S (240, from the start: the experiments run while the models are written), TUNE_S (120; qtune's own --time-limit is 15 s less, so it ends
# on its own and stores its dispatch), TUNE_MOE_S (60, likewise), REPORT_8B_S (240: the 8B report took 193 s on an H200, 107 of them loading
# the FP16 variant, before it gained the attention rows and the PDL and fused-norm variants; qbench rewrites
# the report after each section, so one cut off still returns what it measured, marked incomplete; its end-to-end
# variants run the runtime's default, PDL and fused-norm ones first and the FP16 one, the slowest to load, after them), REPORT_S (100, the MoE report), FUSED_S (60: three 8B runs), MOE_FRAG_S (45), CPU_AMX_S (60), DECODE_S (60), LAUNCH_TIMES_S (75: three model loads). Exit: 0 when every phase
# that ran passed.
set -uo pipefail
run_t0=$(date +%s)
run_s="${RUN_S:-575}"
bundle="${1:?usage: run.sh BUNDLE.tar.xz OUTDIR}"
out="${2:?usage: run.sh BUNDLE.tar.xz OUTDIR}"
[[ -f "$bundle" ]] || { echo "run.sh: $bundle: no such bundle" >&2; exit 2; }
mkdir -p "$out"
out="$(cd "$out" && pwd)"
work="${WORK:-$(mktemp -d)}"
mkdir -p "$work"
# The same bundle already unpacked here by an earlier call: go on from it (see WORK above).
bundle_sum=$(sha256sum "$bundle" | cut -d' ' -f1)
resumed=0
if [[ -f "$work/bundle.sha256" && "$(cat "$work/bundle.sha256")" == "$bundle_sum" && -x "$work/qtune/bin/qbench" ]]; then
  resumed=1
else
  rm -rf "$work/qtune" "$work/done" "$work/models" "$work/logs" "$work/SUMMARY.md" "$work/bundle.sha256"
  tar -xJf "$bundle" -C "$work" || { echo "run.sh: cannot unpack $bundle" >&2; exit 2; }
  echo "$bundle_sum" > "$work/bundle.sha256"
fi
q="$work/qtune"
cuda="${CUDA_HOME:-/usr/local/cuda}"
export QTUNE_HOME="$q" QTUNE_BUILD="$q" QTUNE_EMU_CACHE="$work/emu-cache" QTUNE_CACHE_DIR="$work/nvrtc-cache"
export LD_LIBRARY_PATH="$q/lib:$cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CUDA_HOME="$cuda"
logs="$work/logs"
models="$work/models"
done_dir="$work/done"  # one empty file per phase that passed, which a resumed call skips
mkdir -p "$logs" "$models" "$done_dir"
summary="$work/SUMMARY.md"
status=0

if ((resumed)); then
  { echo; echo "- resumed $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname): the phases that passed before are skipped"; } >> "$summary"
else {
  echo "# qtune GPU run"
  echo
  echo "- started $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), $(nproc) cores"
  sed 's/^/- bundle: /' "$q/BUNDLE"
  echo
  echo "| phase | result | seconds | command |"
  echo "|---|---|---|---|"
} > "$summary"
fi

# Results into OUTDIR: SUMMARY.md, logs.tar.xz, the store, the reports.
pack() {
  cp "$summary" "$out/SUMMARY.md"
  tar -C "$work" -cJf "$out/logs.tar.xz" logs 2>/dev/null
  [[ -f "$work/qtune-cache.sqlite" ]] && cp "$work/qtune-cache.sqlite" "$out/"
  for r in "$work"/report-*/; do
    [[ -d "$r" ]] && tar -C "$work" -cJf "$out/$(basename "$r").tar.xz" "$(basename "$r")"
  done
  return 0
}

# phase NAME LIMIT_S CMD...: runs CMD with its output in logs/NAME.log, records the outcome, packs.
phase() {
  local name="$1" limit="$2"
  shift 2
  local t0 rc result left
  phase_ran=0
  if [[ -f "$done_dir/$name" ]]; then
    echo "| $name | passed in an earlier call | 0 | \`$*\` |" >> "$summary"
    return 0
  fi
  phase_ran=1
  t0=$(date +%s)
  # What is left of the run, less the time the last pack takes.
  left=$((run_t0 + run_s - t0 - 8))
  if ((left < 10)); then
    echo "| $name | not run: the run's ${run_s} s were spent | 0 | \`$*\` |" >> "$summary"
    return 1
  fi
  ((limit > left)) && limit=$left
  ((limit < 5)) && limit=5
  echo "[$(date -u +%H:%M:%S)] $name: $*" | tee -a "$logs/commands.log"
  # Through bash, so that a phase may be one of the functions below (exported with their variables).
  timeout --kill-after=10 "$limit" bash -c '"$@"' phase "$@" > "$logs/$name.log" 2>&1
  rc=$?
  case $rc in
    0) result="passed"; touch "$done_dir/$name" ;;
    124|137) result="stopped at its ${limit} s limit" ;;
    *) result="failed (exit $rc)" ;;
  esac
  echo "| $name | $result | $(( $(date +%s) - t0 )) | \`$*\` |" >> "$summary"
  echo "[$(date -u +%H:%M:%S)] $name: $result" | tee -a "$logs/commands.log"
  pack
  return $rc
}

# Key lines of a log into the summary, unless the phase before was skipped (its excerpt is there already).
phase_ran=1
excerpt() {
  local title="$1" file="$2" pattern="$3"
  ((phase_ran)) || return 0
  [[ -f "$file" ]] || return 0
  { echo; echo "## $title"; echo; echo '```'; grep -E "$pattern" "$file" | head -60; echo '```'; } >> "$summary"
}

selfcheck() {
  set -e
  local m="$q/tests/golden/files/dense.ak48" store="$work/emu-selfcheck.sqlite"
  # sm_80: the architecture qrun's emulator runs by default, so the tuned store serves it.
  "$q/bin/qtune" --device emu --gpu sm80 --model "$m" --buckets 1,8 --budget 2 --cache "$store" --quiet
  "$q/bin/qrun" --device emu --model "$m" --tuned-cache "$store" --prompt-ids 1,2,3 -n 4 --temp 0 -v
}

run_gpu_tests() {
  local rc=0
  for t in "$q"/tests/test_*; do
    echo "== $(basename "$t")"
    QTUNE_REQUIRE_GPU=1 "$t" --warn NoTests || rc=1
  done
  return $rc
}

# The three models at once, one core each; each one's exit status lands in models/NAME.rc.
start_models() {
  local layers="${LAYERS:-36}"
  local m
  for m in "qwen3-8b qwen3-8b.ak48 ak48 $layers" "qwen3-8b qwen3-8b.ajc1 ajc1 $layers" \
           "qwen3-30b-a3b qwen3-30b-a3b-L8.moe3 moe3 8" "qwen3-0.6b qwen3-0.6b.ajc1 ajc1 28"; do
    set -- $m
    # Written by an earlier call (WORK): kept.
    [[ -f "$models/$2.rc" && "$(cat "$models/$2.rc")" == 0 && -f "$models/$2" ]] && continue
    rm -f "$models/$2.rc"
    ( "$q/bin/qconvert" synthetic --preset "$1" --layers "$4" --format "$3" --out "$models/$2" -q \
        > "$logs/models-$2.log" 2>&1; echo $? > "$models/$2.rc" ) &
  done
}

# Waits for start_models' three conversions and fails unless all three wrote their file.
wait_models() {
  local f rc=0
  for f in qwen3-8b.ak48 qwen3-8b.ajc1 qwen3-30b-a3b-L8.moe3; do
    while [[ ! -f "$models/$f.rc" ]]; do sleep 1; done
    echo "$f: exit $(cat "$models/$f.rc"), $(stat -c %s "$models/$f" 2>/dev/null || echo 0) bytes"
    cat "$logs/models-$f.log"
    [[ "$(cat "$models/$f.rc")" == 0 ]] || rc=1
  done
  return $rc
}

# The host CPU's AMX path on real tiles: the bit-exactness tests, then prefill and decode with tiles and without.
# A host without AMX says so (the tests skip, qbench refuses --tiles amx naming why) and the phase still passes.
cpu_amx() {
  local m="$models/qwen3-0.6b.ajc1" rc=0 t tiles
  "$q/cpu-tests/test_runtime" "[amx]" --warn NoTests || rc=1
  while [[ ! -f "$m.rc" ]]; do sleep 1; done
  [[ "$(cat "$m.rc")" == 0 ]] || { echo "== qconvert did not write $m"; cat "$logs/models-qwen3-0.6b.ajc1.log"; return 1; }
  for t in 1 "$(( $(nproc) / 2 > 1 ? $(nproc) / 2 : 1 ))"; do
    for tiles in amx none; do
      echo "== --threads $t --tiles $tiles"
      "$q/bin/qbench" --model "$m" --threads "$t" --tiles "$tiles" --prompt 512 --gen 32 --repeat 1 --warmup 1 \
        --bandwidth-mb 1024 || [[ $tiles == amx ]] || rc=1
    done
  done
  return $rc
}

# The MoE model end to end with its experts as stored and in the frag layout (Hopper's grouped wgmma GEMMs).
moe_frag() {
  local ids layout rc=0
  ids=$(seq -s, 1000 1511)
  for layout in file frag; do
    echo "== --expert-layout $layout"
    "$q/bin/qrun" --device cuda --model "$models/qwen3-30b-a3b-L8.moe3" --expert-layout "$layout" \
      --tuned-cache "$work/qtune-cache.sqlite" --prompt-ids "$ids" -n 64 --temp 0 || rc=1
  done
  return $rc
}

# The 8B AWQ model decoded greedily plain, with the decode norms fused (qrun --fuse-norm; with --pdl on sm_90, as
# qbench's variant runs it), and as qrun does by default without a stored ranking, where its first 16 decode steps
# time the two and the rest run the faster (its statistics line gives both medians): the same tokens at the
# model's real sizes, which the golden models' tests cannot show, and each run's statistics line.
fused_8b() {
  local sm="$1" ids rc=0 extra=() run
  ids=$(seq -s, 2000 2031)
  [[ "$sm" == sm90 ]] && extra=(--pdl)
  echo "== --decode plain"
  "$q/bin/qrun" --device cuda --model "$models/qwen3-8b.ak48" --prompt-ids "$ids" -n 48 --temp 0 --decode plain \
    > "$work/tokens-plain.txt" || rc=1
  echo "== --fuse-norm ${extra[*]}"
  "$q/bin/qrun" --device cuda --model "$models/qwen3-8b.ak48" --prompt-ids "$ids" -n 48 --temp 0 --fuse-norm \
    "${extra[@]}" > "$work/tokens-fused.txt" || rc=1
  echo "== default (the trial)"
  "$q/bin/qrun" --device cuda --model "$models/qwen3-8b.ak48" --prompt-ids "$ids" -n 48 --temp 0 \
    > "$work/tokens-default.txt" || rc=1
  for run in fused default; do
    if cmp -s "$work/tokens-plain.txt" "$work/tokens-$run.txt"; then
      echo "== $run: the same $(wc -l < "$work/tokens-$run.txt") tokens as plain"
    else
      echo "== $run: the tokens differ from plain:"
      diff "$work/tokens-plain.txt" "$work/tokens-$run.txt" | head -20
      rc=1
    fi
  done
  return $rc
}

# Each model's decode with every launch timed (qrun --launch-times, no graph, so no PDL either): the kernels'
# own times, which the step model predicts one by one, and what lies between them.
launch_times() {
  local ids rc=0
  ids=$(seq -s, 2000 2031)
  echo "== qwen3-8b ak48, default"
  "$q/bin/qrun" --device cuda --model "$models/qwen3-8b.ak48" --prompt-ids "$ids" -n 8 --temp 0 \
    --launch-times "$logs/launch-times-8b.json" > /dev/null || rc=1
  echo "== qwen3-8b ak48, --fuse-norm"
  "$q/bin/qrun" --device cuda --model "$models/qwen3-8b.ak48" --prompt-ids "$ids" -n 8 --temp 0 --fuse-norm \
    --launch-times "$logs/launch-times-8b-fused.json" > /dev/null || rc=1
  echo "== qwen3-30b-a3b moe3"
  "$q/bin/qrun" --device cuda --model "$models/qwen3-30b-a3b-L8.moe3" --prompt-ids "$ids" -n 8 --temp 0 \
    --launch-times "$logs/launch-times-30b.json" > /dev/null || rc=1
  return $rc
}

# Each line of scripts/gpu/profile/smNN.txt (name, family, point, shape) run once by qtune profile --device cuda
# under Nsight Compute, where it can read the counters (it did on this workplace's Firecracker machines, not on its
# gVisor ones: then the phase says why and still writes the listings), into logs/profile/NAME.ncu.txt: speed of
# light, occupancy, launch, scheduler and warp-state statistics (the stall reasons), memory workload and the source
# counters (the SASS lines warps stall on). Beside it NAME.sass, the kernel's nvdisasm listing, and NAME.log.
gpu_profile() {
  local list="$1" sm="$2" ncu="" c rc=0 name family point shape args
  for c in ncu "$CUDA_HOME/bin/ncu" /opt/nvidia/nsight-compute/*/ncu; do
    if command -v "$c" > /dev/null 2>&1; then ncu=$(command -v "$c"); break; fi
  done
  mkdir -p "$logs/profile"
  # The listings need nvdisasm (the image has it); without it the counters are still read.
  local nvdisasm
  nvdisasm=$(command -v nvdisasm || { [[ -x "$CUDA_HOME/bin/nvdisasm" ]] && echo "$CUDA_HOME/bin/nvdisasm"; })
  if [[ -n "$nvdisasm" ]]; then export QTUNE_NVDISASM="$nvdisasm"; else echo "== nvdisasm: not found; no listings"; fi
  if [[ -n "$ncu" ]]; then echo "== ncu: $ncu, $("$ncu" --version 2>&1 | tail -1)"; else echo "== ncu: not found; listings only"; fi
  while read -r name family point shape; do
    [[ -z "$name" || "$name" == \#* ]] && continue
    args=(profile --device cuda --gpu "$sm" --family "$family" --shape "$shape")
    [[ -n "$nvdisasm" ]] && args+=(--sass-out "$logs/profile/$name.sass")
    [[ "$point" != default ]] && args+=(--point "$point")
    echo "== $name: $family $point $shape"
    local counted=0
    if [[ -n "$ncu" ]]; then
      "$ncu" --clock-control none --target-processes all --launch-count 4 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
        --section WarpStateStats --section MemoryWorkloadAnalysis --section SourceCounters \
        --log-file "$logs/profile/$name.ncu.txt" "$q/bin/qtune" "${args[@]}" > "$logs/profile/$name.log" 2>&1 < /dev/null
      # ncu may exit 0 having read nothing (no counter permission, no kernel profiled): its report says which.
      if grep -q "Duration" "$logs/profile/$name.ncu.txt" 2> /dev/null; then
        counted=1
        grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per Thread|Waves Per SM|One or More Eligible|Warp Cycles Per Issued" \
          "$logs/profile/$name.ncu.txt" | head -12
      else
        echo "ncu read no counters:"
        grep -hE "==ERROR==|==WARNING==|No kernels were profiled" "$logs/profile/$name.ncu.txt" "$logs/profile/$name.log" 2> /dev/null | head -5
      fi
    fi
    # Without counters, the launch alone, for its verification and listing.
    ((counted)) || "$q/bin/qtune" "${args[@]}" > "$logs/profile/$name.log" 2>&1 < /dev/null
    grep -E "^qtune|[Ee]rror|FAILED" "$logs/profile/$name.log" | head -3
    grep -q "verified against the CPU reference" "$logs/profile/$name.log" || rc=1
  done < "$list"
  return $rc
}

export q work models logs
export -f selfcheck run_gpu_tests wait_models moe_frag fused_8b cpu_amx launch_times gpu_profile

"$q/bin/qtune" devices > "$logs/devices.log" 2>&1
arch=$(sed -n 's/^cuda: \(sm_[0-9]*\) .*/\1/p' "$logs/devices.log" | head -1)
((resumed)) || excerpt "Devices" "$logs/devices.log" '.'
if [[ -z "$arch" || "${SELFCHECK:-0}" == 1 ]]; then
  phase selfcheck "${SELFCHECK_S:-300}" selfcheck || status=1
  excerpt "Self-check on the emulator" "$logs/selfcheck.log" '^(summary|time|dispatch):|tuned|qrun'
fi
if [[ -z "$arch" ]]; then
  echo "run.sh: no usable GPU here ($(grep '^cuda' "$logs/devices.log")); the emulator self-check is all this machine runs" | tee -a "$summary"
  pack
  echo "run.sh: results in $out"
  exit $status
fi
sm="sm${arch#sm_}"
command -v nvidia-smi >/dev/null && nvidia-smi > "$logs/nvidia-smi.log" 2>&1

start_models
phase tests "${TESTS_S:-120}" run_gpu_tests || status=1
excerpt "GPU tests" "$logs/tests.log" '^== |test cases|FAILED|QTUNE_REQUIRE_GPU'
phase cpu-amx "${CPU_AMX_S:-60}" cpu_amx || status=1
excerpt "The host CPU's AMX tiles (qwen3-0.6b ajc1, pp512 and 32 decode steps, the 8B and 30B models being written beside)" \
  "$logs/cpu-amx.log" '^== |QTUNE-SKIPPED|test cases|FAILED|^(backend|bandwidth|prefill|decode|roofline)|error'
experiments_file="$q/scripts/gpu/experiments/$sm.json"
if [[ -f "$experiments_file" ]]; then
  experiments_s="${EXPERIMENTS_S:-105}"
  phase experiments "$experiments_s" "$q/bin/qtune" --gpu "$sm" --points "$experiments_file" \
    --time-limit $((experiments_s - 15)) --cache "$work/qtune-cache.sqlite" --quiet || status=1
  excerpt "Experiments (scripts/gpu/experiments/$sm.json; us, median of the timed repetitions)" "$logs/experiments.log" \
    '^(experiment:|  [a-z]|summary|time|qtune:)'
else
  echo "| experiments | not run: no scripts/gpu/experiments/$sm.json | 0 | |" >> "$summary"
fi

# The decode GEMVs under the hardware's profiler, while the models are still being written.
profile_file="$q/scripts/gpu/profile/$sm.txt"
if [[ -f "$profile_file" ]]; then
  phase profile "${PROFILE_S:-60}" gpu_profile "$profile_file" "$sm" || status=1
  excerpt "Nsight Compute (scripts/gpu/profile/$sm.txt; logs/profile/*.ncu.txt, the SASS in *.sass)" "$logs/profile.log" '.'
else
  echo "| profile | not run: no scripts/gpu/profile/$sm.txt | 0 | |" >> "$summary"
fi

if phase models $(( ${MODELS_S:-240} - ($(date +%s) - run_t0) )) wait_models; then
  tune_s="${TUNE_S:-120}"
  report_buckets=1,4,16,64,256,1024,4096
  # The 8B report first, untuned: it times every family at its default point (the stream GEMVs, the wgmma
  # GEMM), the runtime's default routes, attention decode at 4K and 32K, and end to end with and without
  # programmatic dependent launch: what decides the next defaults.
  phase report-8b "${REPORT_8B_S:-240}" "$q/bin/qbench" --device cuda --model "$models/qwen3-8b.ak48" \
    --q8-model "$models/qwen3-8b.ajc1" --buckets "$report_buckets" --report "$work/report-qwen3-8b" || status=1
  # The launch rows into the summary: the step model's fitted launch cost is checked against them first.
  excerpt "Launch cost (qbench --report, us per launch)" "$work/report-qwen3-8b/REPORT.md" '^\| (grid|[0-9]+ x [0-9]+) \|'
  # Short, and it decides with the report whether the fused decode becomes the default.
  phase fused-8b "${FUSED_S:-60}" fused_8b "$sm" || status=1
  excerpt "Decode norms fused, and the default's trial (qwen3-8b ak48)" "$logs/fused-8b.log" '^== |tok/s|fused norms|decode step|error'
  # The decode step's variants ranked into the store, as a user's `qbench --choose-decode` does: what qrun with the
  # returned store then runs on this GPU.
  phase decode-8b "${DECODE_S:-60}" "$q/bin/qbench" --device cuda --model "$models/qwen3-8b.ak48" \
    --tuned-cache "$work/qtune-cache.sqlite" --choose-decode --prompt 16 --gen 64 --repeat 3 || status=1
  excerpt "Decode variants ranked (qbench --choose-decode, qwen3-8b ak48)" "$logs/decode-8b.log" 'per step|stored|error'
  phase launch-times "${LAUNCH_TIMES_S:-75}" launch_times || status=1
  excerpt "Every launch timed (qrun --launch-times; logs/launch-times-*.json)" "$logs/launch-times.log" \
    '^== |launch times of|^qrun:  +[0-9]|error'
  # The MoE model's grouped GEMMs in the layout the runtime runs them in on sm_90 (the frag one), into the same
  # store, so the MoE report's tuned rows and its "best of the tune" are measured too; and the routed expert
  # GEMVs that --fuse-norm runs at decode (1 and 16 tokens), which the report's fused variant then uses.
  moe_buckets=1,16,64,256,512,1024,4096
  if [[ "$sm" == sm90 ]]; then
    tune_moe_s="${TUNE_MOE_S:-60}"
    phase tune-30b "$tune_moe_s" "$q/bin/qtune" --model "$models/qwen3-30b-a3b-L8.moe3" --gpu "$sm" \
      --families moe_gate_up.frag.q8_0,moe_down.frag.q8_0,moe_gate_up_gemv.frag.q8_0,moe_down_residual_gemv.frag.q8_0 \
      --time-limit $((tune_moe_s - 15)) \
      --buckets "$moe_buckets" --cache "$work/qtune-cache.sqlite" --quiet || status=1
    excerpt "Tune (qwen3-30b-a3b moe3, grouped GEMMs)" "$logs/tune-30b.log" '^(qtune:|summary|time|dispatch|roofline)'
  fi
  # The MoE report's buckets are also its grouped expert GEMMs' token counts, and issue 27 judges those at 512
  # and 4096 tokens: 512 takes 4's place, so the linear rows cost what they did and the phase keeps its limit.
  phase report-30b "${REPORT_S:-100}" "$q/bin/qbench" --device cuda --model "$models/qwen3-30b-a3b-L8.moe3" \
    --tuned-cache "$work/qtune-cache.sqlite" --buckets "$moe_buckets" --report "$work/report-qwen3-30b-a3b" || status=1
  # The 8B tune after both reports: the last run showed the loop closes; what it adds now is measured points of
  # the newer families (stream GEMVs, the wgmma GEMM) for the static model. At the report's buckets, so its time
  # goes to the batch sizes the report measures, and every family the runtime dispatches gets some of it.
  phase tune "$tune_s" "$q/bin/qtune" --model "$models/qwen3-8b.ak48" --gpu "$sm" --time-limit $((tune_s - 15)) \
    --buckets "$report_buckets" --cache "$work/qtune-cache.sqlite" --quiet || status=1
  excerpt "Tune (qwen3-8b ak48)" "$logs/tune.log" '^(qtune:|summary|time|dispatch|roofline)'
  phase decode-30b "${DECODE_S:-60}" "$q/bin/qbench" --device cuda --model "$models/qwen3-30b-a3b-L8.moe3" \
    --tuned-cache "$work/qtune-cache.sqlite" --choose-decode --prompt 16 --gen 64 --repeat 3 || status=1
  excerpt "Decode variants ranked (qbench --choose-decode, qwen3-30b-a3b moe3)" "$logs/decode-30b.log" 'per step|stored|error'
  if [[ "$sm" == sm90 ]]; then
    phase moe-frag "${MOE_FRAG_S:-45}" moe_frag || status=1
    excerpt "MoE experts as stored and in the frag layout" "$logs/moe-frag.log" '^== |tok/s|error'
  fi
else
  status=1
fi
echo "- finished $(date -u +%Y-%m-%dT%H:%M:%SZ)" >> "$summary"
pack
echo "run.sh: results in $out"
exit $status
