#!/usr/bin/env bash
# 20th session (issue 32, item 1: one toolkit): branch halo-walk-s20 (6430684: one pixel-pair
# walk, kit::HaloPairWalk, under HaloPairsBf16 and HaloPairsF32, on main's TF32 rounding at the
# store). kernel_code_diff.sh against main: 34 of 43 kernels the same SASS; the six bf16
# weight-gradient kernels the same size, reordered; the three TF32 forwards 128 bytes longer.
# (1) the GPU tests of every direct tile (TF32, bf16) and the passes' mixes; (2) W4 TF32 own and
# bf16 auto against main's caltech101 (gpu-bundle-s20m, 9f1e073: main's kernels), alternating,
# 2 rounds, no algorithm cache. Predicted: 1.000 +- 0.5% (the same work; the TF32 forwards' 8
# more instructions a kernel are index arithmetic).
# carry ["gpu-bundle-s20hw","gpu-bundle-s20m","gpu-bundle-cmd","datasets/caltech-w4sub"];
# park results/, datasets/caltech101-6 and datasets/ccp-200.
set -u
export BUNDLE=gpu-bundle-s20hw
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf ~/.cache/pdnn
FILTER='ConvGpu.EveryDirectTile*:ConvGpu.Bf16EveryDirectTile*:ConvGpuPasses.*' \
  VISIT_RESULTS=$OUT/v0 timeout 120 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)' $OUT/v0/tests/tests.log | head -3
echo "== tests $(el)s"
BEFORE=gpu-bundle-s20m WORKLOADS="W4" PRECISIONS="tf32 bf16" POLICIES="own" ROUNDS=2 STEPS_W4=40 \
  W4_ARGS="--data datasets/caltech-w4sub --images-per-epoch 448 --conv-algo-cache none" \
  VISIT_RESULTS=$OUT/v1 timeout $(( 230 - $(el) )) scripts/gpu/visit.sh ab-steps 2>&1 | tail -4
tar -czf $OUT/all.tgz -C $OUT v0 v1 2>/dev/null
echo "== end $(el)s"
