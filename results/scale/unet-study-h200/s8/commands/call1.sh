#!/usr/bin/env bash
# Next session (15th), issue 35: the large sides at the submitted planner (bought workspace,
# 9d50450; last measured with older planners). Prepare: BINS="segment pdnn_tests" DATA=
# scripts/gpu/prepare.sh; carry ["gpu-bundle","gpu-bundle-cmd"]; results/ and
# datasets/caltech101-6 parked (tree < 64 MiB). 5120 alone took ~230 s a run in s6.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
APP_ARGS="--conv-transforms" PARTS=pdnn LAYER_TIMES_SIDE=2048 LAYER_TIMES_MID=2G UNCAPPED=0 \
  SIDES="5120" CAPS="5120:43G+75.6G" STEPS=12 PDNN_TIMEOUT=260 \
  BUDGET=540 VISIT_RESULTS=$OUT/v1 timeout 560 scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn|done"
echo "== end $(el)s"
# then: SIDES="5792" CAPS="5792:119.8G"; then SIDES="7168 8192" CAPS="7168:137G 8192:137G" STEPS=3;
# then the strict-fp32 uncapped peaks: APP_ARGS= PARTS=pdnn SIDES="1024 2048" CAPS="" STEPS=12
