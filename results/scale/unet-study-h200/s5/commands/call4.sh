#!/usr/bin/env bash
# Session 12, call 4 (bundle a9b0709): the plan as run, cuDNN's unplanned cap at 16 GiB.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
mark() { echo "$(date +%s.%N) $*" >> $OUT/marks.txt; echo "== $* $(el)s"; }
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -lms 100 > $OUT/smi_mem.csv 2>&1 &
SMI=$!
mark tests
FILTER='ConvWorkspaceGpu.*:ConvGpu.CudnnUnder*:MemoryPlanGpu*:UNetGpu*:StepGraph*' VISIT_RESULTS=$OUT/v1 \
  timeout 100 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)|^\[  FAILED' $OUT/v1/tests/tests.log | head -12
mark "pdnn transforms"
APP_ARGS="--conv-transforms" PARTS=pdnn LAYER_TIMES_SIDE=2048 SIDES="1024 2048" CAPS="1024:6.1G 2048:21.5G" \
  STEPS=12 BUDGET=170 VISIT_RESULTS=$OUT/v_pdnn timeout 175 scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn|done"
grep -h "^memory plan as run\|workspace .* -> " $OUT/v_pdnn/unet-memory/memory_logs/pdnn_*_none.log | cut -c1-260
mark "torch plain autotuned"
PARTS=torch TORCH_SIDES="1024 2048" TORCH_VARIANTS=plain TORCH_TIMEOUT=200 BUDGET=190 VISIT_RESULTS=$OUT/v_torch \
  timeout 195 scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^torch|done"
mark "pdnn strict 1024"
left=$(( 560 - $(el) )); [ $left -gt 70 ] && left=70
PARTS=pdnn SIDES="1024" CAPS="1024:3.3G" STEPS=12 BUDGET=$left VISIT_RESULTS=$OUT/v_strict \
  timeout $left scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn|done"
grep -h "^memory plan as run" $OUT/v_strict/unet-memory/memory_logs/pdnn_*_none.log | cut -c1-200
mark "segment speed"
left=$(( 575 - $(el) ))
[ $left -gt 30 ] && PARTS=speed PRECISIONS="tf32 fp32+transforms" ROUNDS=1 VISIT_RESULTS=$OUT/v_seg \
  timeout $left scripts/gpu/visit.sh segment 2>&1 | tail -6
mark end
kill $SMI
