#!/usr/bin/env bash
# Next session (13th), call 1. Prepare here first:
#   BINS="segment pdnn_tests" DATA= scripts/gpu/prepare.sh
# carry ["gpu-bundle", "gpu-bundle-cmd"]; results/ and datasets/caltech101-6 parked (tree < 64 MiB).
# Issue 35: the uncapped peaks after a9b811b (fit_workspace trims first; predicted ~14.17 and
# 14.86 GiB at 1024 against plans as run of 14.14 / 14.82, results/scale/unet-study-h200 s5),
# 3072 under PyTorch plain's 42.2G with a profile made at the same cuDNN caps (call 3's was
# 11% off), strict pairs with profiles (swapping's cost at the new code). Then issue 34's TF32
# step per layer over steady steps (--steps 20: the profile restarts after step 2).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
echo "== tests $(el)s"
FILTER='ConvWorkspaceGpu.*:ConvGpu.Cudnn*:MemoryPlanGpu*:UNetGpu*:StepGraph*' VISIT_RESULTS=$OUT/v1 \
  timeout 120 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)|^\[  FAILED' $OUT/v1/tests/tests.log | head
echo "== transforms $(el)s"
APP_ARGS="--conv-transforms" PARTS=pdnn LAYER_TIMES_SIDE=2048 SIDES="1024 2048 3072" \
  CAPS="1024:6.1G 2048:21.5G 3072:42.2G" STEPS=12 BUDGET=230 VISIT_RESULTS=$OUT/v2 \
  timeout 235 scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn|done"
grep -h "^memory plan as run" $OUT/v2/unet-memory/memory_logs/pdnn_*_none.log | cut -c1-400
echo "== strict $(el)s"
PARTS=pdnn LAYER_TIMES_SIDE=2048 SIDES="1024 2048" CAPS="1024:3.3G 2048:12.2G" STEPS=12 BUDGET=150 \
  VISIT_RESULTS=$OUT/v3 timeout 155 scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn|done"
grep -h "^memory plan as run" $OUT/v3/unet-memory/memory_logs/pdnn_*_none.log | cut -c1-400
echo "== the U-Net's TF32 step per layer $(el)s"
mkdir -p $OUT/v4 && source scripts/gpu/host.sh && timeout $(( 585 - $(el) )) "$BIN/segment" --device cuda \
  --data datasets/ccp-200 --size 512 --batch 4 --steps 20 --precision tf32 --profile \
  --profile-out $OUT/v4/profile_tf32.csv > $OUT/v4/profile_tf32.log 2>&1; tail -40 $OUT/v4/profile_tf32.log
echo "== end $(el)s"
