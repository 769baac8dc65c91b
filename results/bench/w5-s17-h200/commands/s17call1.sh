#!/usr/bin/env bash
# Next session (17th), issue 32: branch im2col-staged (ef5acfc: im2col from a group of images'
# planes staged in shared memory) against main (c831f4b). Predicted: W5's 13 bf16 im2col launches
# 240 -> ~80 us under ncu, the W5 bf16 step ~1.84 -> ~1.72 ms. (1) its GPU tests; (2) W5's step,
# bf16/TF32, own/auto, alternating; (3) every kernel of W5's bf16 step under ncu (runners/ncu-step.sh, its first run;
# compare with results/bench/w5-side-passes-h200/ncu/step_5b40e9a.csv.gz by scripts/report/ncu_step.py).
# Prepare (the 16th session left both built; check REVISION, rebuild if main moved):
#   at im2col-staged: BINS="dcgan pdnn_tests" DATA= BUNDLE=gpu-bundle-new scripts/gpu/prepare.sh
#   at main: BINS="dcgan" DATA= BUNDLE=gpu-bundle-before2 scripts/gpu/prepare.sh, then
#   rm gpu-bundle-before2/runtime.tar.xz; park results/ and datasets/caltech101-6;
# carry ["gpu-bundle-new","gpu-bundle-before2","gpu-bundle-cmd","datasets/caltech-w4sub"]
set -u
export BUNDLE=gpu-bundle-new
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf ~/.cache/pdnn
source scripts/gpu/host.sh >/dev/null 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -n1)
echo "== tests $(el)s"
FILTER='ConvGpu.Index64Col2im*:ConvGpu.Im2col*:ConvGpu.Bf16Every*:ConvGpu.EveryAlgorithm*:ConvGpuPasses.*:*Backends*:Dcgan.*:UNetGpu*' \
  VISIT_RESULTS=$OUT/v1 timeout 150 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)|^\[  FAILED|Failure' $OUT/v1/tests/tests.log | head -20
echo "== ab-steps W5 $(el)s"
BEFORE=gpu-bundle-before2 WORKLOADS="W5" PRECISIONS="bf16 tf32" POLICIES="own auto" ROUNDS=2 \
  W5_ARGS="--data datasets/caltech-w4sub --conv-algo-cache none" W5_IMAGES=960 VISIT_RESULTS=$OUT/v2 \
  timeout 150 scripts/gpu/visit.sh ab-steps 2>&1 | tail -6
echo "== ncu W5 bf16 step kernels $(el)s"
WORKLOAD=W5 PRECISION=bf16 POLICY=own VISIT_RESULTS=$OUT/v3 timeout 200 scripts/gpu/visit.sh ncu-step 2>&1 | tail -26
echo "== end $(el)s"
