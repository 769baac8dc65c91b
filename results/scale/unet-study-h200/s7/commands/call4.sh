#!/usr/bin/env bash
# Session 14, call 4. Bundle: w5prep (4550a1c + the side kernels, uncommitted), BINS="dcgan
# bench_conv_gpu pdnn_tests segment". The space-to-depth test (fixed: the layer takes even
# sides); issue 35: the planner's bought workspace (9d50450, first run on a GPU) at the study's
# caps, fp32 with transforms, with the uncapped steps for swapping's cost.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
echo "== tests $(el)s"
FILTER='ConvGpu.Bf16SpaceToDepth*:MemoryPlanGpu*:ConvWorkspaceGpu.*:UNetGpu*' VISIT_RESULTS=$OUT/v1 \
  timeout 120 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)|^\[  FAILED|Failure' $OUT/v1/tests/tests.log | head -20
echo "== transforms, bought workspace $(el)s"
APP_ARGS="--conv-transforms" PARTS=pdnn LAYER_TIMES_SIDE=2048 LAYER_TIMES_MID=2G \
  SIDES="1024 2048 3072" CAPS="1024:3.3G 2048:12.2G 3072:35.4G" STEPS=12 \
  BUDGET=$(( 560 - $(el) )) VISIT_RESULTS=$OUT/v2 timeout $(( 570 - $(el) )) scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn|done"
grep -h "^workspace \|^predicted step" $OUT/v2/unet-memory/memory_logs/pdnn_*.log | cut -c1-300
echo "== end $(el)s"
