#!/usr/bin/env bash
# 18th session, call I (issues 32, 34): the U-Net (512 x 512, batch 4) in TF32 with tf32pm's
# direct kernels (6c05894) against main a69d890 (ab-steps, auto, 2 rounds), then tf32pm's TF32
# step beside the PyTorch twin in one command (segment PARTS=speed, 1 round).
# Predicted: the U-Net's TF32 step 36.5 -> ~33-35 ms (its 3x3 passes that auto gives the direct
# kernels; W4's own passes saved ~20%).
# carry ["gpu-bundle-tf32u","gpu-bundle-mainseg","gpu-bundle-cmd"]; park results/, datasets/caltech101-6.
set -u
export BUNDLE=gpu-bundle-tf32u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf ~/.cache/pdnn
BEFORE=gpu-bundle-mainseg WORKLOADS="UNet" PRECISIONS="tf32" POLICIES="auto" ROUNDS=2 \
  VISIT_RESULTS=$OUT/v1 timeout 170 scripts/gpu/visit.sh ab-steps 2>&1 | tail -4
echo "== the twin $(el)s"
PARTS=speed PRECISIONS="tf32" ROUNDS=1 VISIT_RESULTS=$OUT/v2 \
  timeout $(( 300 - $(el) )) scripts/gpu/visit.sh segment 2>&1 | tail -5
tar -czf $OUT/all.tgz -C $OUT v1 v2 2>/dev/null
echo "== end $(el)s"
