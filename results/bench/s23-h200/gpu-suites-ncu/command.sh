#!/usr/bin/env bash
# s23 call E (nvidia-h200): the code submitted (3f6cf43's kernels, gpu-bundle-busy): the GPU test
# suites (MPI's aside), then Nsight Compute on three W4 bf16 passes for the next round's plan
# (issue 32: why backward-weights and the forward kind sit at 3-6x their floors).
set -u
export BUNDLE=gpu-bundle-busy
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
FILTER='ConvGpu*:ConvWorkspaceGpu.*:MemoryPlanGpu.*:GraphMemoryPlan.*:Bf16Gpu.*:Bf16Step.*:KernelKitGpu.*:CudaRuntime.*:StepShellGpu.*:UNetGpu.*:HebbianCuda.*:MemoryPlanExecution.*:Backends*:Bf16Ops.*:Bf16Cast.*:Tuning.*' \
  VISIT_RESULTS=$OUT/e1 timeout 400 bash scripts/gpu/visit.sh tests 2>&1 | tail -4
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $OUT/e1/tests/tests.log | tail -12
echo "== tests $(el)s"
PROFILES="c4w_bf16=W4_conv4/direct/bf16/3/direct_bww c2f_bf16=W4_conv2/direct/bf16/3/direct_fwd c2d_bf16=W4_conv2/direct/bf16/9/direct_fwd" \
  VISIT_RESULTS=$OUT/e2 timeout 150 bash scripts/gpu/visit.sh ncu-conv 2>&1 | tail -45
echo "== ncu $(el)s"
