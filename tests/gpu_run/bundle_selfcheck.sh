#!/usr/bin/env bash
# bundle.sh, then the bundled run.sh from a fresh directory on a machine without a GPU: it must pass its
# emulator self-check, say that there is no GPU, and leave its results (at most 8 files) in OUTDIR.
set -euo pipefail
src="$1"
build="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
QTUNE_BUILD_DIR="$build" bash "$src/scripts/gpu/bundle.sh" "$tmp/bundle.tar.xz"
mkdir "$tmp/fresh"
cd "$tmp/fresh"
tar -xJf ../bundle.tar.xz qtune/scripts/gpu/run.sh
t0=$(date +%s)
# Nothing of the trees it came from: no QTUNE_HOME/QTUNE_BUILD, and a driver path that cannot load, so even a
# machine with a GPU runs the no-GPU path here.
rc=0
env -u QTUNE_HOME -u QTUNE_BUILD QTUNE_LIBCUDA=/nonexistent/libcuda.so.1 WORK="$tmp/fresh/work" \
  bash qtune/scripts/gpu/run.sh ../bundle.tar.xz out || rc=$?
echo "run.sh took $(( $(date +%s) - t0 )) s"
# On failure: the reason, then what run.sh recorded, so a CI log alone says what went wrong.
fail() {
  echo "bundle_selfcheck: $*" >&2
  [[ -f out/SUMMARY.md ]] && cat out/SUMMARY.md >&2
  [[ -f out/logs.tar.xz ]] && tar -xJf out/logs.tar.xz -O logs/selfcheck.log 2>/dev/null | tail -40 >&2
  exit 1
}
(( rc == 0 )) || fail "run.sh exited with $rc"
grep -q '| selfcheck | passed' out/SUMMARY.md || fail "the self-check did not pass: $(cat out/SUMMARY.md)"
grep -q 'no usable GPU here' out/SUMMARY.md || fail "run.sh did not say that there is no GPU"
[[ -f out/logs.tar.xz ]] || fail "no logs.tar.xz"
(( $(ls out | wc -l) <= 8 )) || fail "more than 8 result files: $(ls out)"
tar -xJf out/logs.tar.xz -O logs/selfcheck.log | grep -q 'time: .* candidates/s' || fail "the self-check's tune printed no accounting"
tar -xJf out/logs.tar.xz -O logs/selfcheck.log | grep -Eq '[1-9][0-9]* tuned' || fail "qrun used no tuned kernel"
# The experiments the run measures first on a Hopper GPU travel with it.
listing=$(tar -tJf ../bundle.tar.xz)
grep -qx 'qtune/scripts/gpu/experiments/sm90.json' <<< "$listing" || fail "the bundle has no experiments for sm90"
grep -qx 'qtune/scripts/gpu/profile/sm90.txt' <<< "$listing" || fail "the bundle has no profile list for sm90"
echo "bundle_selfcheck: passed"
