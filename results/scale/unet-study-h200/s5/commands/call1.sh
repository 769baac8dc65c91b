#!/usr/bin/env bash
# Next session, call 1 (written 2026-11-28, eleventh session). Prepare here first:
#   git checkout wsfit && BINS="segment pdnn_tests" DATA= scripts/gpu/prepare.sh && git checkout main
# carry ["gpu-bundle", "gpu-bundle-cmd"]; results/ and datasets/caltech101-6 parked (tree < 64 MiB).
# wsfit's GPU tests, then issue 35's uncapped peaks against their plans (1024, 2048; were
# +13.8% / +9.5% with the workspace grown by the algorithms' timing), then issue 34's TF32 step
# per layer (where the 0.5-0.8% behind PyTorch goes: the convolutions alone are ahead).
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
echo "== tests $(el)s"
FILTER='ConvWorkspaceGpu.*:StepGraph*:StepShellGpu*:UNetGpu*:MemoryPlanGpu*' VISIT_RESULTS=$OUT/v \
  timeout 200 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)|^\[  FAILED' $OUT/v/tests/tests.log | head
echo "== uncapped against the plan $(el)s"
PARTS=pdnn LAYER_TIMES_SIDE=2048 SIDES="1024 2048" CAPS="1024:3.3G 2048:12.2G" STEPS=12 VISIT_RESULTS=$OUT/v2 \
  timeout 300 scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn|done"
grep -h "workspace .* -> .* MiB" $OUT/v2/unet-memory/memory_logs/pdnn_*_none.log | cut -c1-300
echo "== the U-Net's TF32 step per layer $(el)s"
mkdir -p $OUT/v3 && source scripts/gpu/host.sh && timeout $(( 580 - $(el) )) "$BIN/segment" --device cuda \
  --data datasets/ccp-200 --size 512 --batch 4 --epochs 1 --precision tf32 --profile --profile-out $OUT/v3/profile_tf32.csv \
  > $OUT/v3/profile_tf32.log 2>&1; tail -40 $OUT/v3/profile_tf32.log
echo "== end $(el)s"
