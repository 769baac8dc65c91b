#!/usr/bin/env bash
# Session 15, call 4 (issue 32): a09ea8e (f6207d1 + the phases' pair epilogue and the weights' compile-time loader) against accdc63; first:
# channel-minor copy by cp.async stages (branch cm16). Bundles: gpu-bundle-before = accdc63
# (dcgan bench_conv_gpu, bin only), gpu-bundle = the change (dcgan bench_conv_gpu pdnn_tests).
# carry ["gpu-bundle","gpu-bundle-before","gpu-bundle-cmd","datasets/caltech-w4sub"]
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
source scripts/gpu/host.sh >/dev/null 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -n1)
echo "== tests $(el)s"
FILTER='ConvGpu.Bf16*:ConvGpu.EveryDirectTile*:ConvGpuPasses.Bf16*:ConvK4s2*:Bf16Gpu.*:Bf16Step*:KernelKitGpu*:ConvTranspose2d*:Dcgan.*' \
  VISIT_RESULTS=$OUT/v1 timeout 120 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)|^\[  FAILED|Failure' $OUT/v1/tests/tests.log | head -20
echo "== ab-steps W5 bf16 $(el)s"
BEFORE=gpu-bundle-before WORKLOADS=W5 PRECISIONS="bf16" POLICIES="own auto" ROUNDS=2 \
  W5_ARGS="--data datasets/caltech-w4sub" W5_IMAGES=960 VISIT_RESULTS=$OUT/v2 \
  timeout 170 scripts/gpu/visit.sh ab-steps 2>&1 | tail -8
echo "== conv-ab W5 $(el)s"
BEFORE=gpu-bundle-before FILTERS="W5" ROUNDS=2 VISIT_RESULTS=$OUT/v3 timeout 150 \
  scripts/gpu/visit.sh conv-ab 2>&1 | grep -E "W5|sum|after/before" | head -40
echo "== ncu durations after $(el)s"
mkdir -p $OUT/w5
left=$(( 480 - $(el) ))
[ $left -gt 20 ] && timeout $left $NCU --target-processes all --metrics gpu__time_duration.sum --csv \
  $BIN/bench_conv_gpu --filter W5 --algos direct --precisions bf16 --repeat 3 \
  --out $OUT/w5/ncu_run.csv > $OUT/w5/ncu_durations_after.csv 2> $OUT/w5/ncu_durations.err; echo rc=$?
echo "== ncu-conv $(el)s"
PROFILES="d2fwd=D.conv2/direct/bf16/3/direct_fwd_cm d2bd=D.conv2/direct/bf16/9/direct_fwd_cm d1bd=D.conv1/direct/bf16/9/direct_fwd_cm" \
  VISIT_RESULTS=$OUT/w5/ncu timeout $(( 580 - $(el) )) scripts/gpu/visit.sh ncu-conv 2>&1 | tail -1
tar czf $OUT/w5.tgz -C $OUT w5 && rm -rf $OUT/w5
echo "== end $(el)s"
