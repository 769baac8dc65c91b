#!/usr/bin/env bash
# Next session (16th), issue 35: 5792 under 119.8G at the current planner (the 15th session's try
# ran out of its 300 s: three profiles at 2048 ~75 s, then algorithm timing at 5792). Prepare:
# BINS="segment" DATA= scripts/gpu/prepare.sh; carry ["gpu-bundle","gpu-bundle-cmd"];
# results/ and datasets/caltech101-6 parked (tree < 64 MiB).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
APP_ARGS="--conv-transforms" PARTS=pdnn LAYER_TIMES_SIDE=2048 LAYER_TIMES_MID=2G UNCAPPED=0 \
  SIDES="5792" CAPS="5792:119.8G" STEPS=12 PDNN_TIMEOUT=480 \
  BUDGET=560 VISIT_RESULTS=$OUT/v1 timeout 580 scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn|done"
echo "== end $(el)s"
# then: SIDES="7168 8192" CAPS="7168:137G 8192:137G" STEPS=3 (one call each, BUDGET=560)
