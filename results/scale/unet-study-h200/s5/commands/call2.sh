#!/usr/bin/env bash
# Session 12, call 2 (bundle 4f359a8): cuDNN under a memory plan. GPU tests, then the U-Net at
# 1024 and 2048 under PyTorch plain's memory, strict fp32 and fp32+transforms, then PyTorch plain
# (autotuner on) at the same sides, one command. nvidia-smi samples the GPU's memory all along.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
mark() { echo "$(date +%s.%N) $*" >> $OUT/marks.txt; echo "== $* $(el)s"; }
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -lms 100 > $OUT/smi_mem.csv 2>&1 &
SMI=$!
mark idle
sleep 2
mark tests
FILTER='ConvGpu.*:ConvWorkspaceGpu.*:MemoryPlanGpu*:UNetGpu*' VISIT_RESULTS=$OUT/v1 \
  timeout 150 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)|^\[  FAILED|SKIPPED \]' $OUT/v1/tests/tests.log | head -20
for variant in strict transforms; do
  mark "pdnn $variant"
  args=""; [ $variant = transforms ] && args="--conv-transforms"
  APP_ARGS="$args" PARTS=pdnn LAYER_TIMES_SIDE=2048 UNCAPPED=0 SIDES="1024 2048" CAPS="1024:6.1G 2048:21.5G" \
    STEPS=12 BUDGET=110 VISIT_RESULTS=$OUT/v_$variant timeout 120 scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn|done"
done
mark "torch plain"
left=$(( 585 - $(el) ))
PARTS=torch TORCH_SIDES="1024 2048" TORCH_VARIANTS=plain TORCH_TIMEOUT=200 BUDGET=$left VISIT_RESULTS=$OUT/v_torch \
  timeout $left scripts/gpu/visit.sh unet-memory 2>&1 | tail -8
mark end
kill $SMI
