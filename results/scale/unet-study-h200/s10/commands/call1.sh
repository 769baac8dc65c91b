#!/usr/bin/env bash
# 18th session, call B (issue 35): 5792 under 119.8G again, at main a69d890. The 16th session's
# run (3,713.6 ms against the plan's 3,361.8: 1.105) timed im2col at 5792 through col2im with a
# 32-bit grid-stride counter that wrapped (17.4 s for up1's forward; a61fe30 fixed it, its GPU
# test passed in the 17th session), so up1's forward ran the implicit GEMM (85.8 ms against the
# 42.7 predicted). Predicted now: up1 back near 43 ms, the step ~3,670 ms, ~1.09 of the plan.
# Then, if time is left in a call of its own: 7168 under 137G (next1.sh's command).
# Bundle: gpu-bundle-next; carry ["gpu-bundle-next","gpu-bundle-cmd"]; park results/ and datasets/caltech101-6.
set -u
export BUNDLE=gpu-bundle-next
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
APP_ARGS="--conv-transforms" PARTS=pdnn LAYER_TIMES_SIDE=2048 LAYER_TIMES_MID=2G UNCAPPED=0 \
  SIDES="5792" CAPS="5792:119.8G" STEPS=12 PDNN_TIMEOUT=480 BUDGET=560 VISIT_RESULTS=$OUT/v1 \
  timeout 580 scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn|done"
echo "== end $(el)s"
