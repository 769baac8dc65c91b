#!/usr/bin/env bash
# memory: training past the GPU's memory (issue 18) on a lent host: the planner's GPU tests, then
# scripts/bench_memory.sh (W4 per side, uncapped and under --gpu-memory-limit caps, beside
# PyTorch plain / save_on_cpu / checkpoint) -> $RESULTS/memory.csv, memory_logs/.
# Prepare: DATA= BINS="caltech101 pdnn_tests" scripts/gpu/prepare.sh (the photos travel in the
# tree). Knobs: SIDES ("224 672"), CAPS ("27G"), TORCH_STEPS (3), TORCH (1), TESTS (1); several
# SIDES/CAPS sets as PLAN="224:20G 672:27G 1120:77G" (side:caps, caps joined by +).
set -uo pipefail
source "$(dirname "$0")/../host.sh"
need_bin caltech101 || exit 1
if [ "${TESTS:-1}" = 1 ] && [ -x "$BIN/pdnn_tests" ]; then
  stage "MemoryPlan tests"
  "$BIN/pdnn_tests" --gtest_filter='MemoryPlan*' > "$RESULTS/tests.log" 2>&1
  grep -E "^\[  (PASSED|FAILED)|SKIPPED \]|Failure" "$RESULTS/tests.log" | head -12
fi
for item in ${PLAN:-224:20G 672:27G}; do  # APP_ARGS passes through to bench_memory.sh
  side=${item%%:*}
  caps=$(echo "${item#*:}" | tr '+' ' ')
  stage "W4 at ${side}x$side, caps $caps"
  BIN=$BIN PYTHON=$PYTHON SIDES=$side CAPS="$caps" TORCH_STEPS=${TORCH_STEPS:-3} \
    TORCH=${TORCH:-1} OUT="$RESULTS/memory.csv" scripts/bench_memory.sh 2>&1 | grep -v "^epoch"
done
