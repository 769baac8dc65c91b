#!/usr/bin/env bash
# 17th session, call 5. (A) issue 32: s17 at 5d0a363 (the weights' re-layout with its shared
# memory runs padded against bank conflicts) against main (kernels of c831f4b = bb4e368), W5
# bf16 only. Call 3 measured the re-layout at 168 us in 22 launches (main's gather: 152), its
# Phase layouts 12.2 us (2M elements) and 7-9 us (small): 16-way bank conflicts. Predicted:
# prep_weights_bf16_k ~110 us; with the casts (71 -> 51 us) the bf16 step ~0.97 of main's.
# (B) issue 34's accuracy target (within 1 point of the twin over 3 seeds) in a comparison that
# the timed algorithm choices' draw does not decide (the 16th session found the no-BatchNorm
# U-Net's plateau at lr 1e-3 a draw of each fresh run's choices, on both sides): both sides with
# BatchNorm (segment --batchnorm on, the twin's --batchnorm on), seeds 1-5, ~75 s a seed with
# the twin's scoring of pdnn's weights. (Later: no BatchNorm, pdnn on cuDNN, the twin --cudnn
# deterministic, seeds 1-8.) The U-Net at s17: its fp32 code is main's.
# Prepare: at s17: BINS="dcgan pdnn_tests segment" DATA= BUNDLE=/work/main/gpu-bundle-s17 scripts/gpu/prepare.sh
# carry ["gpu-bundle-s17","gpu-bundle-before2","gpu-bundle-cmd","datasets/caltech-w4sub"]
set -u
export BUNDLE=gpu-bundle-s17
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf ~/.cache/pdnn
source scripts/gpu/host.sh >/dev/null 2>&1
echo "== tests $(el)s"
FILTER='ConvGpu.Bf16DirectWeights*:ConvGpu.Bf16Every*:Bf16Gpu.Cast*:ConvGpuPasses.*:Dcgan.*' \
  VISIT_RESULTS=$OUT/v1 timeout 90 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)|^\[  FAILED|Failure' $OUT/v1/tests/tests.log | head -20
echo "== ab-steps W5 bf16 $(el)s"
BEFORE=gpu-bundle-before2 WORKLOADS="W5" PRECISIONS="bf16" POLICIES="own auto" ROUNDS=3 \
  W5_ARGS="--data datasets/caltech-w4sub --conv-algo-cache none" W5_IMAGES=960 VISIT_RESULTS=$OUT/v2 \
  timeout 100 scripts/gpu/visit.sh ab-steps 2>&1 | tail -4
echo "== ncu W5 bf16 step kernels $(el)s"
WORKLOAD=W5 PRECISION=bf16 POLICY=own VISIT_RESULTS=$OUT/v3 timeout 100 scripts/gpu/visit.sh ncu-step 2>&1 | tail -14
echo "== U-Net with BatchNorm, seeds 1-5 $(el)s"
PARTS=accuracy SEEDS="1 2 3 4 5" OVERLAYS=0 PDNN_ARGS="--batchnorm on" TWIN_ARGS="--batchnorm on" \
  VISIT_RESULTS=$OUT/v4 timeout $(( 570 - $(el) )) scripts/gpu/visit.sh segment 2>&1 | tail -30
echo "== end $(el)s"
