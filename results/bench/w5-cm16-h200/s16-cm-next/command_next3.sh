#!/usr/bin/env bash
# Next session (16th), issue 32: (1) what sets direct_fwd_cm's step (15th session: 1.2
# instructions a cycle with 8 or 16 warps; stalls spread over fixed-latency, shared-memory and
# tensor-pipe waits): its SASS and ncu's SourceCounters on D.conv2's forward; (2) branch cm-next
# (f1d36a3: Fwd128's channel-minor kernel one block an SM, no spill; predicted D.conv2 forward
# ~25 -> ~22 us under ncu) against main; (3) W5's bf16 step per layer at the new code.
# Prepare: at cm-next BINS="bench_conv_gpu dcgan pdnn_tests" DATA= scripts/gpu/prepare.sh;
# at main BINS="bench_conv_gpu dcgan" DATA= BUNDLE=gpu-bundle-before scripts/gpu/prepare.sh
# (then rm gpu-bundle-before/runtime.tar.xz); park results/ and datasets/caltech101-6;
# carry ["gpu-bundle","gpu-bundle-before","gpu-bundle-cmd","datasets/caltech-w4sub"]
# Built at the 15th session's end: gpu-bundle = cm-next (f1d36a3), gpu-bundle-before = main
# (3fffa31): check their REVISION files; rebuild if main has moved.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
source scripts/gpu/host.sh >/dev/null 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -n1)
echo "== tests $(el)s"
FILTER='ConvGpu.Bf16*:ConvGpuPasses.Bf16*:ConvK4s2*:Bf16Step*:Dcgan.*' \
  VISIT_RESULTS=$OUT/v1 timeout 120 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)|^\[  FAILED|Failure' $OUT/v1/tests/tests.log | head -20
echo "== ab-steps W5 bf16 $(el)s"
BEFORE=gpu-bundle-before WORKLOADS=W5 PRECISIONS="bf16" POLICIES="own auto" ROUNDS=2 \
  W5_ARGS="--data datasets/caltech-w4sub" W5_IMAGES=960 VISIT_RESULTS=$OUT/v2 \
  timeout 120 scripts/gpu/visit.sh ab-steps 2>&1 | tail -4
echo "== conv-ab W5 $(el)s"
BEFORE=gpu-bundle-before FILTERS="W5" ROUNDS=2 VISIT_RESULTS=$OUT/v3 timeout 120 \
  scripts/gpu/visit.sh conv-ab 2>&1 | grep -E "sum|D.conv[23] " | head -12
echo "== sass $(el)s"
KERNELS='direct_fwd_cm' VISIT_RESULTS=$OUT/v4 timeout 120 scripts/gpu/visit.sh sass 2>&1 | tail -1
mkdir -p $OUT/w5
echo "== ncu source counters $(el)s"
timeout 120 $NCU --target-processes all --kernel-name regex:direct_fwd_cm --launch-skip 3 --launch-count 1 \
  --section SourceCounters --section WarpStateStats --print-details all \
  $BIN/bench_conv_gpu --filter D.conv2 --algos direct --precisions bf16 --repeat 3 --out $OUT/w5/run.csv \
  > $OUT/w5/d2fwd_source.txt 2>&1; echo rc=$?
echo "== W5 bf16 profile $(el)s"
timeout 90 $BIN/dcgan --device cuda --dataset caltech --data datasets/caltech-w4sub \
  --images-per-epoch 960 --steps 60 --threads 8 --conv-algo own --precision bf16 --profile \
  --out /tmp/w5prof.csv --profile-out $OUT/w5/profile_w5_own_bf16.csv > $OUT/w5/w5_profile.log 2>&1; echo rc=$?
tar czf $OUT/w5.tgz -C $OUT w5 && rm -rf $OUT/w5
echo "== end $(el)s"
