#!/usr/bin/env bash
# 17th session, call 3 (call 2 again after its findings): issue 32, branch s17 at 32bba1f (the
# re-layout with its loads in flight together; the casts 4 wide; the cast test fixed) against main (kernels of c831f4b = bb4e368).
# Call 2 measured the casts 71 -> 50.5 us (ncu) and the first re-layout kernel slower (196 us in
# 20 launches, its loads one after the other). Predicted now: prep_weights_bf16_k ~65 us; the
# bf16 step ~0.95 of main's (1.85 -> ~1.76 ms). TF32 untouched (no bf16 weights, no casts): ~1.00.
# (1) GPU tests; (2) ab-steps W5 bf16/tf32, own/auto, alternating; (3) PyTorch's W5 in the same
# command; (4) ncu of every kernel of the bf16 step.
# Prepare: at s17: BINS="dcgan pdnn_tests" DATA= BUNDLE=/work/main/gpu-bundle-s17 scripts/gpu/prepare.sh
# carry ["gpu-bundle-s17","gpu-bundle-before2","gpu-bundle-cmd","datasets/caltech-w4sub"]
set -u
export BUNDLE=gpu-bundle-s17
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf ~/.cache/pdnn
source scripts/gpu/host.sh >/dev/null 2>&1
echo "== tests $(el)s"
FILTER='Bf16Gpu.*:Bf16Cast*:ConvGpu.Bf16*:ConvGpu.EveryAlgorithm*:ConvGpuPasses.*:*Backends*:Dcgan.*:ConvTranspose2d*:UNetGpu*' \
  VISIT_RESULTS=$OUT/v1 timeout 150 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)|^\[  FAILED|Failure' $OUT/v1/tests/tests.log | head -20
grep -E "^\[       OK \] (ConvGpu.Bf16DirectWeights|Bf16Gpu.Cast)" $OUT/v1/tests/tests.log
echo "== ab-steps W5 $(el)s"
BEFORE=gpu-bundle-before2 WORKLOADS="W5" PRECISIONS="bf16 tf32" POLICIES="own auto" ROUNDS=3 \
  W5_ARGS="--data datasets/caltech-w4sub --conv-algo-cache none" W5_IMAGES=960 VISIT_RESULTS=$OUT/v2 \
  timeout 150 scripts/gpu/visit.sh ab-steps 2>&1 | tail -6
mkdir -p $OUT/k
echo "== PyTorch W5 $(el)s"
timeout 100 env -u LD_LIBRARY_PATH "$PYTHON" scripts/twins/torch_gpu_bench.py --workloads W5 \
  --modes graph --precisions bf16,tf32 --steps 100 --out $OUT/k/torch_w5.csv > $OUT/k/torch_w5.log 2>&1; echo rc=$?
tail -6 $OUT/k/torch_w5.log
echo "== ncu W5 bf16 step kernels $(el)s"
WORKLOAD=W5 PRECISION=bf16 POLICY=own VISIT_RESULTS=$OUT/v3 timeout 200 scripts/gpu/visit.sh ncu-step 2>&1 | tail -26
echo "== end $(el)s"
