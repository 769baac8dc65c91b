#!/usr/bin/env bash
# Session 15, call 2 (issue 32): the 4x4 stride-2 forward-kind passes of one image a block from a
# channel-minor copy by cp.async stages (branch cm16). Bundles: gpu-bundle-before = accdc63
# (dcgan bench_conv_gpu, bin only), gpu-bundle = the change (dcgan bench_conv_gpu pdnn_tests).
# carry ["gpu-bundle","gpu-bundle-before","gpu-bundle-cmd","datasets/caltech-w4sub"]
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
source scripts/gpu/host.sh >/dev/null 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -n1)
echo "== tests $(el)s"
FILTER='ConvGpu.*:ConvGpuPasses.*:ConvK4s2*:Bf16Gpu.*:Bf16Step*:KernelKitGpu*:ConvTranspose2d*:Dcgan.*:ConvWorkspaceGpu.*:UNetGpu*:MemoryPlanGpu.Bf16*' \
  VISIT_RESULTS=$OUT/v1 timeout 170 scripts/gpu/visit.sh tests 2>&1 | tail -1
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
left=$(( 560 - $(el) ))
[ $left -gt 20 ] && timeout $left $NCU --target-processes all --metrics gpu__time_duration.sum --csv \
  $BIN/bench_conv_gpu --filter W5 --algos direct --precisions bf16 --repeat 3 \
  --out $OUT/w5/ncu_run.csv > $OUT/w5/ncu_durations_after.csv 2> $OUT/w5/ncu_durations.err; echo rc=$?
tar czf $OUT/w5.tgz -C $OUT w5 && rm -rf $OUT/w5
echo "== end $(el)s"
