#!/usr/bin/env bash
# (w2: the bundle of 2d73d0d, whose plan buys no workspace past the host's pinned memory: the 8192 run at 0293492 stopped on the host's memory before training.)
# 19th session, call W (issue 35): 7168 (SIDE=8192: 8192) under 137G at 0293492, whose plan takes
# the times of the convolutions past 2^31-element images from a profile of the implicit GEMM
# (--layer-times-wide, made by bench_memory.sh beside the others at 2048). At 50645d6 the same
# run measured 6,211.96 ms against a plan of 5,090.7 (1.22; 8192: 10,117.5 / 8,482.2, 1.19).
# Predicted here: the plan ~5,560-5,630 ms (the wide layers' implicit times, ~+470-540 ms), the
# step unchanged (~6,210): ~1.10-1.12.
# Bundle: gpu-bundle-wide (segment at 0293492); carry ["gpu-bundle-wide2","gpu-bundle-cmd"];
# park results/ and datasets/caltech101-6 (datasets/ccp-200 travels in the tree).
set -u
export BUNDLE=gpu-bundle-wide2
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
APP_ARGS="--conv-transforms" PARTS=pdnn LAYER_TIMES_SIDE=2048 LAYER_TIMES_MID=2G UNCAPPED=0 \
  SIDES="${SIDE:-7168}" CAPS="${SIDE:-7168}:137G" STEPS=12 PDNN_TIMEOUT=500 BUDGET=560 \
  VISIT_RESULTS=$OUT/v1 timeout 580 scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn|done"
grep -E "layer times from|^predicted step|^memory plan applied" $OUT/v1/unet-memory/memory_logs/pdnn_*.log | cut -c1-400
tar -czf $OUT/logs.tgz -C $OUT/v1/unet-memory memory_logs 2>/dev/null
echo "== end $(el)s"
