#!/usr/bin/env bash
# tests: pdnn's test suite on the GPU host (the GPU tests run instead of skipping there)
# -> $RESULTS/tests.log. Prepare: BINS=pdnn_tests (with the apps the chosen tests start).
# Knobs: FILTER (a --gtest_filter; default all).
set -uo pipefail
source "$(dirname "$0")/../host.sh"
need_bin pdnn_tests || exit 1
PATH="$BIN:$PATH" "$BIN/pdnn_tests" --gtest_filter="${FILTER:-*}" > "$RESULTS/tests.log" 2>&1
rc=$?
grep -E "^\[  (PASSED|FAILED)|SKIPPED \]|tests ran" "$RESULTS/tests.log" | tail -20
exit $rc
