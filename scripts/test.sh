#!/usr/bin/env bash
# The test command: installs and builds (scripts/setup.sh), runs every CTest test not labelled `slow`, then
# rebuilds the input-hardening tests with AddressSanitizer + UBSan and runs them again.
#
#   bash scripts/test.sh              # what CI runs
#   QTUNE_TEST_LABELS=slow bash scripts/test.sh   # the exhaustive sweeps too (ctest -L)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
jobs="${QTUNE_JOBS:-$(nproc)}"

bash "$root/scripts/setup.sh"
cd "$root/build"
if [[ -n "${QTUNE_TEST_LABELS:-}" ]]; then
  ctest -L "$QTUNE_TEST_LABELS" -j "$jobs" --output-on-failure
else
  ctest -LE slow -j "$jobs" --output-on-failure
fi

# Sanitized pass: the tests labelled `sanitize` (malformed files, fuzz corpora, emulator bug detection) run
# again under ASan+UBSan, where a read past a buffer is a failure rather than luck.
if [[ "${QTUNE_SKIP_SANITIZE:-0}" != 1 ]]; then
  QTUNE_BUILD_DIR="$root/build-asan" QTUNE_CMAKE_ARGS="-DQTUNE_SANITIZE=ON -DQTUNE_BUILD_BENCHMARKS=OFF" \
    QTUNE_BUILD_TARGETS=sanitize_tests \
    bash "$root/scripts/setup.sh"
  cd "$root/build-asan"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest -L sanitize -LE slow -j "$jobs" --output-on-failure
fi
