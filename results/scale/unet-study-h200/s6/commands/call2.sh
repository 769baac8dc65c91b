#!/usr/bin/env bash
# Session 13, call 2: forced cuDNN's least (cuDNN's own algorithm counted), the allocator's
# tighter reuse and its asked bytes; the U-Net's uncapped peaks against the plan as run.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
echo "== tests $(el)s"
FILTER='ConvWorkspaceGpu.*:CudaRuntime.*:ConvGpu.Cudnn*:MemoryPlanGpu*:UNetGpu*:StepGraph*' VISIT_RESULTS=$OUT/v1 \
  timeout 150 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)|^\[  FAILED|Failure|expected|Which is' $OUT/v1/tests/tests.log | head -30
echo "== uncapped peaks $(el)s"
APP_ARGS="--conv-transforms" PARTS=pdnn LAYER_TIMES_SIDE=2048 SIDES="1024 2048" \
  CAPS="1:1G" STEPS=12 BUDGET=200 VISIT_RESULTS=$OUT/v2 \
  timeout 205 scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn|done"
grep -h "^memory plan as run\|^trainer: workspace" $OUT/v2/unet-memory/memory_logs/pdnn_*_none.log | cut -c1-700
echo "== end $(el)s"
