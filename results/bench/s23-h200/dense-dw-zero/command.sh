#!/usr/bin/env bash
# s23 call H (nvidia-h200): Dense's weight gradient written, not added, by the first backward
# after zero_grad (issue 32's W4 step), against 3f6cf43 (gpu-bundle-before-dz: gpu-bundle-busy's
# binaries): its GPU tests, then W4 steps alternating.
set -u
export BUNDLE=gpu-bundle-dz
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
FILTER='Bf16Gpu.Dense*:Bf16Step.*:CudaRuntime.*:MemoryPlanGpu.*:StepShellGpu.*:GraphMemoryPlan.*:ConvGpuPasses.W4Step*' \
  VISIT_RESULTS=$OUT/h1 timeout 170 bash scripts/gpu/visit.sh tests 2>&1 | tail -3
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $OUT/h1/tests/tests.log | tail -8
echo "== tests $(el)s"
BEFORE=gpu-bundle-before-dz WORKLOADS="W4" POLICIES="own" PRECISIONS="bf16 tf32" ROUNDS=2 \
  W4_ARGS="--data datasets/caltech-w4sub --images-per-epoch 448 --conv-algo-cache none" \
  VISIT_RESULTS=$OUT/h2 timeout 150 bash scripts/gpu/visit.sh ab-steps 2>&1 | tail -6
echo "== ab-steps $(el)s"
cd $OUT && tar czf h.tar.gz h1 h2 && rm -rf h1 h2
