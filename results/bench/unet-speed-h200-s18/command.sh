#!/usr/bin/env bash
# 18th session, call A (issues 34, 32): (1) the GPU tests of the 17th session's code not yet run
# on a GPU: the U-Net's Dice steps as a graph (UNetGpu.DiceGraphStepsGiveTheEagerWeights), the
# re-layout's element test on the gather kernel (ConvGpu.Bf16DirectWeights*), the casts
# (Bf16Gpu.Cast*), with the U-Net's and the bf16 suites; (2) issue 34's GPU speed target in ONE
# command at one revision: the U-Net 512 x 512, batch 4, graph, pdnn against the twin in fp32
# (pdnn strict and with --conv-transforms: PyTorch's fp32 runs cuDNN's Winograd/FFT) and TF32
# (PARTS=speed: both frameworks alternate, ROUNDS 2).
# Bundle: gpu-bundle-next (main a69d890: dcgan caltech101 segment pdnn_tests); check REVISION.
# carry ["gpu-bundle-next","gpu-bundle-cmd"]; park results/ and datasets/caltech101-6.
set -u
export BUNDLE=gpu-bundle-next
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf ~/.cache/pdnn
source scripts/gpu/host.sh >/dev/null 2>&1
echo "== tests $(el)s"
FILTER='UNetGpu*:ConvGpu.Bf16DirectWeights*:Bf16Gpu.*:ConvGpu.Bf16Every*:ConvGpuPasses.*:StepShellGpu*:*Backends*:Dcgan.*' \
  VISIT_RESULTS=$OUT/v1 timeout 200 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)|^\[  FAILED|Failure' $OUT/v1/tests/tests.log | head -20
echo "== U-Net speed 512 b4, fp32 / fp32+transforms / TF32, pdnn and the twin $(el)s"
PARTS=speed PRECISIONS="fp32 fp32+transforms tf32" ROUNDS=2 VISIT_RESULTS=$OUT/v2 \
  timeout $(( 570 - $(el) )) scripts/gpu/visit.sh segment 2>&1 | tail -20
echo "== end $(el)s"
