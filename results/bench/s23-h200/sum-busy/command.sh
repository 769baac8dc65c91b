#!/usr/bin/env bash
# s23 call C (nvidia-h200): two changes (issue 32) against main 21fd525 (gpu-bundle-dist23): the
# split sum in groups, and bww warps past x's channels idle. Their GPU tests, the W4 direct
# passes (backward-weights include the sum), W4/W5 steps alternating, a W4 bf16 step under ncu.
set -u
export BUNDLE=gpu-bundle-busy
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
FILTER='KernelKitGpu.*:ConvGpu.EveryDirectTile*:ConvGpu.Bf16EveryDirectTile*:ConvGpu.EveryAlgorithmAndPass*:ConvGpu.Bf16EveryAlgorithmAndPass*:ConvGpuPasses.*:Bf16Step*' \
  VISIT_RESULTS=$OUT/c1 timeout 200 bash scripts/gpu/visit.sh tests 2>&1 | tail -2
grep -E "^\[  (PASSED|FAILED)|^\[  SKIPPED|tests ran" $OUT/c1/tests/tests.log | tail -12
echo "== tests $(el)s"
BEFORE=gpu-bundle-before23 FILTERS="W4" ALGOS="direct" PRECISIONS="bf16,tf32" ROUNDS=2 REPEAT=10 \
  VISIT_RESULTS=$OUT/c2 timeout 150 bash scripts/gpu/visit.sh conv-ab 2>&1 | tail -40
echo "== conv-ab $(el)s"
BEFORE=gpu-bundle-before23 WORKLOADS="W4 W5" POLICIES="own" PRECISIONS="bf16 tf32" ROUNDS=2 \
  W5_ARGS="--data datasets/caltech-w4sub --conv-algo-cache none" W5_IMAGES=960 \
  W4_ARGS="--data datasets/caltech-w4sub --images-per-epoch 448 --conv-algo-cache none" \
  VISIT_RESULTS=$OUT/c3 timeout 280 bash scripts/gpu/visit.sh ab-steps 2>&1 | tail -16
echo "== ab-steps $(el)s"
WORKLOAD=W4 PRECISION=bf16 POLICY=own SKIP=3000 COUNT=400 STEPS=60 \
  VISIT_RESULTS=$OUT/c4 timeout 120 bash scripts/gpu/visit.sh ncu-step 2>&1 | tail -24
echo "== ncu-step $(el)s"
