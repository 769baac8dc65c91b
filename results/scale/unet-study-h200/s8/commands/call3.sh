#!/usr/bin/env bash
# Session 15, call 3: (issue 32) Nsight Compute sections and SASS of direct_fwd_cm (f6207d1):
# D.conv2's forward (Fwd128, 16 steps) and backward-data (phases, Fwd64), D.conv1's
# backward-data (Fwd32, 3 channels out); (issue 35) 5792 under 119.8G at the current planner,
# then the strict-fp32 uncapped peaks at 1024 and 2048 if time is left.
# Bundle: gpu-bundle = f6207d1 (bench_conv_gpu segment pdnn_tests). carry ["gpu-bundle","gpu-bundle-cmd"]
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
echo "== sass $(el)s"
KERNELS='direct_fwd_cm' VISIT_RESULTS=$OUT/v1 timeout 60 scripts/gpu/visit.sh sass 2>&1 | tail -1
echo "== ncu-conv $(el)s"
PROFILES="d2fwd=D.conv2/direct/bf16/3/direct_fwd_cm d2bd=D.conv2/direct/bf16/9/direct_fwd_cm d1bd=D.conv1/direct/bf16/9/direct_fwd_cm" \
  VISIT_RESULTS=$OUT/v2 timeout 180 scripts/gpu/visit.sh ncu-conv 2>&1 | tail -2
echo "== unet 5792 $(el)s"
APP_ARGS="--conv-transforms" PARTS=pdnn LAYER_TIMES_SIDE=2048 LAYER_TIMES_MID=2G UNCAPPED=0 \
  SIDES="5792" CAPS="5792:119.8G" STEPS=12 PDNN_TIMEOUT=260 \
  BUDGET=300 VISIT_RESULTS=$OUT/v3 timeout 320 scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn|done"
left=$(( 560 - $(el) ))
echo "== strict-fp32 uncapped peaks $(el)s (left $left)"
[ $left -gt 90 ] && APP_ARGS= PARTS=pdnn SIDES="1024 2048" CAPS="" STEPS=12 \
  BUDGET=$(( left - 20 )) VISIT_RESULTS=$OUT/v4 timeout $(( left - 10 )) scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn|done"
echo "== end $(el)s"
