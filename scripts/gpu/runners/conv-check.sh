#!/usr/bin/env bash
# conv-check: the GPU convolution tests (issue 25): every algorithm and tile against the double
# reference, every mix of per-pass algorithms through Conv2d / ConvTranspose2d, the W4 step with
# mixed choices against the CPU, the CPU-vs-GPU table of every op -> $RESULTS/tests.log. When
# the bundle also holds pdnn_tests_oldskip (scripts/gpu/oldskip.sh: the weight-gradient skip of
# 01ac16f..848cf59 put back), runs the mix tests on it too: they must FAIL there
# (oldskip.log). Prepare: BINS="pdnn_tests" scripts/gpu/prepare.sh && scripts/gpu/oldskip.sh,
# then prepare.sh --bundle gpu-bundle build-gpu/bin/pdnn_tests build-gpu/bin/pdnn_tests_oldskip.
# Knobs: TEST_FILTER (default the conv and backend tests).
set -uo pipefail
source "$(dirname "$0")/../host.sh"
need_bin pdnn_tests || exit 1
filter=${TEST_FILTER:-ConvGpu*:ConvGpuPasses*:AllOps/Backends.*}
PATH="$BIN:$PATH" "$BIN/pdnn_tests" --gtest_filter="$filter" > "$RESULTS/tests.log" 2>&1
rc=$?
grep -E "^\[  (PASSED|FAILED)|SKIPPED \]|tests ran|Failure|outside|rel|error" "$RESULTS/tests.log" | head -60
if [ -x "$BIN/pdnn_tests_oldskip" ]; then
  stage "the same mix tests with the old weight-gradient skip put back (must fail)"
  "$BIN/pdnn_tests_oldskip" --gtest_filter='ConvGpuPasses*' > "$RESULTS/oldskip.log" 2>&1
  orc=$?
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]" "$RESULTS/oldskip.log" | head -20
  grep -E "gpu - cpu|outside" "$RESULTS/oldskip.log" | head -8
  if [ $orc -eq 0 ]; then echo "conv-check: the old skip was NOT caught"; rc=1
  else echo "conv-check: the old skip fails the tests, as it must"; fi
fi
exit $rc
