#!/usr/bin/env bash
# Session 14, call 5. Bundle: w5prep (4550a1c + the side kernels' second version, rows a thread
# by size, + the whole-image window without im2col/col2im on the GPU), BINS="dcgan
# bench_conv_gpu pdnn_tests segment"; gpu-bundle-before = 4550a1c.
# carry ["gpu-bundle","gpu-bundle-before","gpu-bundle-cmd","datasets/caltech-w4sub"]
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
source scripts/gpu/host.sh >/dev/null 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -n1)
echo "== tests $(el)s"
FILTER='ConvGpu.*:ConvGpuPasses.*:ConvK4s2*:Bf16Gpu.*:Bf16Step*:KernelKitGpu*:ConvTranspose2d*:Dcgan.*:Sequential*' \
  VISIT_RESULTS=$OUT/v1 timeout 200 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)|^\[  FAILED|Failure' $OUT/v1/tests/tests.log | head -20
echo "== conv-ab W5 $(el)s"
BEFORE=gpu-bundle-before FILTERS="W5" ROUNDS=2 VISIT_RESULTS=$OUT/v2 timeout 150 \
  scripts/gpu/visit.sh conv-ab 2>&1 | grep -E "sum|D.conv5|G.convT1 " | head -12
mkdir -p $OUT/w5
echo "== ncu durations $(el)s"
timeout 60 $NCU --target-processes all --metrics gpu__time_duration.sum --csv \
  $BIN/bench_conv_gpu --filter W5 --algos direct --precisions bf16 --repeat 3 \
  --out $OUT/w5/ncu_run.csv > $OUT/w5/ncu_durations_after.csv 2> $OUT/w5/ncu_durations.err; echo rc=$?
for L in D.conv3 G.convT3; do
  timeout 40 $NCU --target-processes all --metrics gpu__time_duration.sum --csv \
    $BIN/bench_conv_gpu --filter $L --algos direct:m128 --precisions bf16 --repeat 3 --direct-images many \
    --out $OUT/w5/ncu_run_many.csv > $OUT/w5/ncu_durations_many_$L.csv 2>> $OUT/w5/ncu_durations.err; echo rc=$?
done
echo "== ab-steps W5 $(el)s"
BEFORE=gpu-bundle-before WORKLOADS=W5 PRECISIONS="bf16 tf32" POLICIES="own auto" ROUNDS=2 \
  W5_ARGS="--data datasets/caltech-w4sub" W5_IMAGES=960 VISIT_RESULTS=$OUT/v3 \
  timeout 200 scripts/gpu/visit.sh ab-steps 2>&1 | tail -7
mkdir -p /tmp/w5prof; echo "== W5 bf16 profile $(el)s"
timeout 40 $BIN/dcgan --device cuda --dataset caltech --data datasets/caltech-w4sub \
  --images-per-epoch 960 --steps 60 --threads 8 --conv-algo own --precision bf16 --profile \
  --out /tmp/w5prof/epochs.csv --profile-out $OUT/w5/profile_w5_own_bf16.csv > $OUT/w5/w5_own_bf16_profile.log 2>&1; echo rc=$?
tar czf $OUT/w5.tgz -C $OUT w5 && rm -rf $OUT/w5
left=$(( 575 - $(el) ))
echo "== issue 35: the other caps at the current planner $(el)s (budget $left s)"
if [ $left -gt 150 ]; then
  APP_ARGS="--conv-transforms" PARTS=pdnn LAYER_TIMES_SIDE=2048 LAYER_TIMES_MID=2G UNCAPPED=0 \
    SIDES="1024 2048 3072" CAPS="1024:6.1G 2048:21G+21.5G 3072:42.2G" STEPS=12 \
    BUDGET=$(( left - 10 )) VISIT_RESULTS=$OUT/v4 timeout $left scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn|done"
fi
echo "== end $(el)s"
