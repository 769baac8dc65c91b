#!/usr/bin/env bash
# 19th session, call A (issue 35): 7168 under 137G with a steady step (STEPS=12: the first block
# of 8 steps, ~150 s, is left out; the 18th session's STEPS=3 measured none), then, in a call of
# its own, 8192 (SIDES=8192 CAPS=8192:137G). Plan at main: 7168 predicted 5,126.5 ms.
# Bundle: gpu-bundle-next (check REVISION); carry ["gpu-bundle-next","gpu-bundle-cmd"];
# park results/ and datasets/caltech101-6 (datasets/ccp-200 travels in the tree).
set -u
export BUNDLE=gpu-bundle-next
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
APP_ARGS="--conv-transforms" PARTS=pdnn LAYER_TIMES_SIDE=2048 LAYER_TIMES_MID=2G UNCAPPED=0 \
  SIDES="${SIDE:-7168}" CAPS="${SIDE:-7168}:137G" STEPS=12 PDNN_TIMEOUT=500 BUDGET=560 \
  VISIT_RESULTS=$OUT/v1 timeout 580 scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn|done"
echo "== end $(el)s"
