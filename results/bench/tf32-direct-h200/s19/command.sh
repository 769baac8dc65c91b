#!/usr/bin/env bash
# 19th session, call C (issue 32): the TF32 figures again at the code submitted. The 18th
# session measured TF32's new direct kernels at 6c05894; its review (18a4074) retyped the
# weights' loads, which changes the TF32 forwards' PTX (Fwd32 spills 4 bytes) and returns the
# bf16/fp32 kernels to a69d890's. W4 TF32 own and auto, main against a69d890
# (gpu-bundle-a69d890-cal: its caltech101, bin only), alternating, 2 rounds. 6c05894 measured:
# own 16.11 -> 12.77, auto 13.60 -> 12.08. (The U-Net's TF32 row, 6c05894: 36.41 -> 35.66 ms,
# needs segment-only bundles of both to fit the tree: as the 18th session's call I.)
# carry ["gpu-bundle-next","gpu-bundle-a69d890-cal","gpu-bundle-cmd","datasets/caltech-w4sub"];
# park results/, datasets/caltech101-6 and datasets/ccp-200 (the tree < 64 MiB).
set -u
export BUNDLE=gpu-bundle-next
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf ~/.cache/pdnn
FILTER='ConvGpu.EveryDirectTile*:ConvGpu.Bf16EveryDirectTile*:ConvGpuPasses.*' \
  VISIT_RESULTS=$OUT/v0 timeout 150 scripts/gpu/visit.sh tests 2>&1 | tail -1
BEFORE=gpu-bundle-a69d890-cal WORKLOADS="W4" PRECISIONS="tf32" POLICIES="own auto" ROUNDS=2 \
  W4_ARGS="--data datasets/caltech-w4sub --images-per-epoch 448 --conv-algo-cache none" \
  VISIT_RESULTS=$OUT/v1 timeout 400 scripts/gpu/visit.sh ab-steps 2>&1 | tail -8
tar -czf $OUT/all.tgz -C $OUT v0 v1 2>/dev/null
echo "== end $(el)s"
