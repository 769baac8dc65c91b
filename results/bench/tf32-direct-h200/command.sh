#!/usr/bin/env bash
# 18th session, call H (issue 32): branch tf32pm (6c05894), TF32's direct 3x3 kernels on the bf16
# kernels' pixel-major stages (ldmatrix fragments, staging rounded once, 8-byte pairs), against
# main a69d890. (1) the GPU tests of the direct kernels and the passes' mixes; (2) W4 TF32 under
# own and auto, the builds alternating, 2 rounds (ab-steps; before = main's caltech101, bin only);
# (3) the per-layer eager profile of W4 TF32 own on tf32pm.
# Predicted: W4 conv2's forward 1.213 -> ~0.6-0.7 ms (twice bf16's 0.329: half the mma rate,
# twice the bytes); W4 TF32 own step 16.0 -> ~12.5-13.5 ms (forward and backward-data both run
# the forward kernel); auto less (it already takes cuDNN for some passes).
# carry ["gpu-bundle-tf32","gpu-bundle-mainbin","gpu-bundle-cmd","datasets/caltech-w4sub"];
# park results/, datasets/caltech101-6 and datasets/ccp-200 (the tree must stay under 64 MiB).
set -u
export BUNDLE=gpu-bundle-tf32
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf ~/.cache/pdnn
source scripts/gpu/host.sh >/dev/null 2>&1
echo "== tests $(el)s"
FILTER='ConvGpu.EveryDirectTile*:ConvGpu.Bf16EveryDirectTile*:ConvGpu.EveryAlgorithm*:ConvGpu.Bf16EveryAlgorithm*:ConvGpu.Index64*:ConvGpuPasses.*:KernelKit*:Bf16Step*' \
  VISIT_RESULTS=$OUT/v1 timeout 170 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)|^\[  FAILED|Failure' $OUT/v1/tests/tests.log | head -20
echo "== ab-steps W4 TF32 $(el)s"
BEFORE=gpu-bundle-mainbin WORKLOADS="W4" PRECISIONS="tf32" POLICIES="own auto" ROUNDS=2 \
  W4_ARGS="--data datasets/caltech-w4sub --images-per-epoch 448 --conv-algo-cache none" \
  VISIT_RESULTS=$OUT/v2 timeout 200 scripts/gpu/visit.sh ab-steps 2>&1 | tail -6
echo "== profile W4 TF32 own (tf32pm) $(el)s"
mkdir -p $OUT/p
timeout 60 $BIN/caltech101 --device cuda --threads 8 --precision tf32 --conv-algo own --steps 14 \
  --data datasets/caltech-w4sub --images-per-epoch 448 --conv-algo-cache none --profile \
  --profile-out $OUT/p/profile_w4_own_tf32.csv > $OUT/p/profile.log 2>&1
echo "profile rc $?: $(grep -E '^ *(0|2|5|7|10|12) +Conv2d' $OUT/p/profile.log | head -6 | tr -s ' ' | tr '\n' ';')"
tar -czf $OUT/all.tgz -C $OUT v1 v2 p 2>/dev/null
echo "== end $(el)s"
