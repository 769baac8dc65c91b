#!/usr/bin/env bash
# Session 13, call 3: the plan's mid times (--workspace-held 2G at 2048, --layer-times-mid)
# at the study's caps, fp32 with transforms (PyTorch's fp32 contract).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
echo "== tests $(el)s"
FILTER='MemoryPlanGpu.WorkspaceHeld*:MemoryPlanGpu.LeastWorkspace*:MemoryPlanGpu.UNet*' VISIT_RESULTS=$OUT/v1 \
  timeout 90 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)|^\[  FAILED|Failure' $OUT/v1/tests/tests.log | head -20
echo "== capped, mid times $(el)s"
APP_ARGS="--conv-transforms" PARTS=pdnn LAYER_TIMES_SIDE=2048 LAYER_TIMES_MID=2G UNCAPPED=0 \
  SIDES="1024 2048 3072" CAPS="1024:3.3G+6.1G 2048:12.2G+21G+21.5G 3072:35.4G+42.2G" STEPS=12 \
  BUDGET=440 VISIT_RESULTS=$OUT/v2 timeout 445 scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn|done|layer times"
grep -h "^workspace \|^predicted step" $OUT/v2/unet-memory/memory_logs/pdnn_*.log | cut -c1-200
grep -h "workspace held" $OUT/v2/unet-memory/memory_logs/profile_*.log | cut -c1-200
echo "== end $(el)s"
