#!/usr/bin/env bash
# Session 12, call 3 (bundle 65afb5b): cuDNN under a plan without the 1 GiB cap.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
mark() { echo "$(date +%s.%N) $*" >> $OUT/marks.txt; echo "== $* $(el)s"; }
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -lms 100 > $OUT/smi_mem.csv 2>&1 &
SMI=$!
mark tests
FILTER='ConvWorkspaceGpu.*:MemoryPlanGpu.LeastWorkspace*:ConvGpu.CudnnUnder*:ConvGpu.Choices*' VISIT_RESULTS=$OUT/v1 \
  timeout 120 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)|^\[  FAILED' $OUT/v1/tests/tests.log | head -12
mark "torch plain 3072 default"
PARTS=torch TORCH_SIDES="3072" TORCH_VARIANTS=plain TORCH_CUDNN_BENCHMARK=off TORCH_STEPS=2 TORCH_WARMUP=1 \
  TORCH_TIMEOUT=120 BUDGET=125 VISIT_RESULTS=$OUT/v_t3072 timeout 130 scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^torch|done"
peak=$(awk -F, '$2=="pytorch" && $4=="3072" && $14=="ok" {print $8}' $OUT/v_t3072/unet-memory/unet_memory.csv | tail -1)
cap3=$(awk -v p="${peak:-46.6}" 'BEGIN{printf "%.1f", int((p + 0.592) * 10) / 10}')
echo "torch 3072 peak ${peak:-none} GiB -> pdnn cap ${cap3}G"
mark "pdnn transforms"
APP_ARGS="--conv-transforms" PARTS=pdnn LAYER_TIMES_SIDE=2048 UNCAPPED=0 SIDES="1024 2048 3072" \
  CAPS="1024:6.1G 2048:21.5G 3072:${cap3}G" STEPS=12 BUDGET=170 VISIT_RESULTS=$OUT/v_pdnn \
  timeout 180 scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn|done"
mark "torch plain autotuned"
left=$(( 570 - $(el) ))
PARTS=torch TORCH_SIDES="1024 2048" TORCH_VARIANTS=plain TORCH_TIMEOUT=200 BUDGET=$left VISIT_RESULTS=$OUT/v_torch \
  timeout $left scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^torch|done"
mark end
kill $SMI
