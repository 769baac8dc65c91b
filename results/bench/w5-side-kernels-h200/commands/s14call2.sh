#!/usr/bin/env bash
# Session 14, call 2 (issue 32): W5's bf16 side kernels (space-to-depth a block a plane, the
# weights' re-layout a row a grid row, the split sums' 32-bit indices), uncommitted on w5prep
# (4550a1c + conv2d_direct.cu). Bundles: gpu-bundle-before = 4550a1c (dcgan bench_conv_gpu,
# bin only), gpu-bundle = the change (dcgan bench_conv_gpu pdnn_tests).
# carry ["gpu-bundle","gpu-bundle-before","gpu-bundle-cmd","datasets/caltech-w4sub"]
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
source scripts/gpu/host.sh >/dev/null 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -n1)
echo "== tests $(el)s"
FILTER='ConvK4s2*:ConvGpu.*:ConvGpuPasses.*:Bf16Gpu.*:Bf16Step*:KernelKitGpu*:ConvTranspose2d*:Dcgan.*' \
  VISIT_RESULTS=$OUT/v1 timeout 200 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)|^\[  FAILED|Failure' $OUT/v1/tests/tests.log | head -20
echo "== conv-ab W5 W4 $(el)s"
BEFORE=gpu-bundle-before FILTERS="W5 W4" ROUNDS=2 VISIT_RESULTS=$OUT/v2 timeout 200 \
  scripts/gpu/visit.sh conv-ab 2>&1 | grep -E "W5|sum|after/before" | head -40
echo "== ncu durations after $(el)s"
mkdir -p $OUT/w5
timeout 100 $NCU --target-processes all --metrics gpu__time_duration.sum --csv \
  $BIN/bench_conv_gpu --filter W5 --algos direct --precisions bf16 --repeat 3 \
  --out $OUT/w5/ncu_run.csv > $OUT/w5/ncu_durations_after.csv 2> $OUT/w5/ncu_durations.err; echo rc=$?
echo "== ab-steps W5 bf16 $(el)s"
BEFORE=gpu-bundle-before WORKLOADS=W5 PRECISIONS="bf16" POLICIES="own auto" ROUNDS=2 \
  W5_ARGS="--data datasets/caltech-w4sub" W5_IMAGES=960 VISIT_RESULTS=$OUT/v3 \
  timeout $(( 540 - $(el) )) scripts/gpu/visit.sh ab-steps 2>&1 | tail -8
mkdir -p /tmp/w5prof; echo "== W5 bf16 profile after $(el)s"
left=$(( 585 - $(el) ))
[ $left -gt 30 ] && timeout $left $BIN/dcgan --device cuda --dataset caltech --data datasets/caltech-w4sub \
  --images-per-epoch 960 --steps 60 --threads 8 --conv-algo own --precision bf16 --profile \
  --out /tmp/w5prof/epochs.csv --profile-out $OUT/w5/profile_w5_own_bf16.csv > $OUT/w5/w5_own_bf16_profile.log 2>&1; echo rc=$?
tar czf $OUT/w5.tgz -C $OUT w5 && rm -rf $OUT/w5
echo "== end $(el)s"
