#!/usr/bin/env bash
# Session 13, call 4: the plan's mid times at 5120 (under 43G: offloads and recomputation;
# under 75.6G), fp32 with transforms.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
APP_ARGS="--conv-transforms" PARTS=pdnn LAYER_TIMES_SIDE=2048 LAYER_TIMES_MID=2G UNCAPPED=0 \
  SIDES="5120" CAPS="5120:43G+75.6G" STEPS=12 PDNN_TIMEOUT=230 \
  BUDGET=500 VISIT_RESULTS=$OUT/v2 timeout 505 scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn|done|layer times"
grep -h "^workspace \|^predicted step\|^bench time" $OUT/v2/unet-memory/memory_logs/pdnn_*.log | cut -c1-200
echo "== end $(el)s"
