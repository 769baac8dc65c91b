#!/usr/bin/env bash
# 20th session (issue 32): branch tf32-late-round (50d907b): kit::HaloPairsF32 rounds to TF32 as it
# stores, not as it loads (the rounding read the loaded register: each step waited for the next
# step's loads before its mma; ncu: 61% of conv2's TF32 forward stall cycles). (1) the GPU tests
# of the direct kernels and the passes' mixes (TF32 every tile against the double reference);
# (2) W4 TF32 own and auto, and bf16 auto (a control: no bf16 kernel changed), against main's
# kernels (gpu-bundle-next-cal: 50645d6's caltech101, bin only; main's later commits change no
# kernel), alternating, 2 rounds, no algorithm cache.
# Predicted: conv2's TF32 forward and backward-data 0.98 / 1.05 -> ~0.65-0.85 ms each (the
# chooser's lines); W4 TF32 own 12.80 -> ~12.0-12.4 ms; auto less; bf16 1.00.
# Bundle: gpu-bundle-late (caltech101 pdnn_tests at 50d907b; check REVISION);
# carry ["gpu-bundle-late","gpu-bundle-next-cal","gpu-bundle-cmd","datasets/caltech-w4sub"];
# park results/, datasets/caltech101-6 and datasets/ccp-200.
set -u
export BUNDLE=gpu-bundle-late
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf ~/.cache/pdnn
FILTER='ConvGpu.EveryDirectTile*:ConvGpu.Bf16EveryDirectTile*:ConvGpuPasses.*' \
  VISIT_RESULTS=$OUT/v0 timeout 150 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)|^\[  FAILED' $OUT/v0/tests/tests.log | head
echo "== tests $(el)s"
BEFORE=gpu-bundle-next-cal WORKLOADS="W4" PRECISIONS="tf32" POLICIES="own auto" ROUNDS=2 \
  W4_ARGS="--data datasets/caltech-w4sub --images-per-epoch 448 --conv-algo-cache none" \
  VISIT_RESULTS=$OUT/v1 timeout 200 scripts/gpu/visit.sh ab-steps 2>&1 | tail -5
BEFORE=gpu-bundle-next-cal WORKLOADS="W4" PRECISIONS="bf16" POLICIES="auto" ROUNDS=2 \
  W4_ARGS="--data datasets/caltech-w4sub --images-per-epoch 448 --conv-algo-cache none" \
  VISIT_RESULTS=$OUT/v2 timeout 120 scripts/gpu/visit.sh ab-steps 2>&1 | tail -3
for f in $OUT/v1/ab-steps/*_W4_own_tf32_r1.log; do
  echo "$(basename $f): $(grep -E '^conv algorithm: conv2d (fwd|bwd-data) n64 c32x224x224' $f | sed -E 's/.*-> //' | tr '\n' ' ')"
done
tar -czf $OUT/all.tgz -C $OUT v0 v1 v2 2>/dev/null
echo "== end $(el)s"
