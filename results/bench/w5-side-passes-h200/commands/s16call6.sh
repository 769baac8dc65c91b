#!/usr/bin/env bash
# 16th session, call 6, issue 32: 5b40e9a (im2col 16 bytes a thread), 12bbdc2 (BatchNorm's
# splits from call 5's bench_kernels) on top of call 5's code, against main 3fffa31; W4 too.
# (1) the GPU tests of what changed; (2) W5's step, bf16 own/auto and TF32 own, the builds
# alternating; (3) every kernel of W5's bf16 step under ncu (as call 3), to check each
# prediction kernel by kernel.
# Prepare: BINS="bench_conv_gpu dcgan pdnn_tests bench_kernels caltech101" DATA= BUNDLE=gpu-bundle-new scripts/gpu/prepare.sh
# (at 5b40e9a); gpu-bundle-before2 = main 3fffa31 (bench_conv_gpu dcgan caltech101, bin only);
# carry ["gpu-bundle-new","gpu-bundle-before2","gpu-bundle-cmd","datasets/caltech-w4sub"]
set -u
export BUNDLE=gpu-bundle-new
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf ~/.cache/pdnn
source scripts/gpu/host.sh >/dev/null 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -n1)
echo "== tests $(el)s"
FILTER='Bf16Gpu.*:ConvGpu.EveryImplicit*:ConvGpu.Bf16*:ConvGpu.EveryAlgorithm*:ConvGpuPasses.*:BatchNorm2d.*:*Backends*:Dcgan.*:Bf16Step*:ConvTranspose2d*' \
  VISIT_RESULTS=$OUT/v1 timeout 200 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)|^\[  FAILED|Failure' $OUT/v1/tests/tests.log | head -20
echo "== ab-steps W5 $(el)s"
BEFORE=gpu-bundle-before2 WORKLOADS="W5 W4" PRECISIONS="bf16 tf32" POLICIES="own auto" ROUNDS=2 \
  W5_ARGS="--data datasets/caltech-w4sub --conv-algo-cache none" W5_IMAGES=960 \
  W4_ARGS="--data datasets/caltech-w4sub --images-per-epoch 448 --conv-algo-cache none" VISIT_RESULTS=$OUT/v2 \
  timeout 300 scripts/gpu/visit.sh ab-steps 2>&1 | tail -10
mkdir -p $OUT/k
echo "== ncu W5 bf16 step kernels $(el)s"
timeout 120 $NCU --metrics gpu__time_duration.sum --csv --launch-skip 6000 --launch-count 420 \
  $BIN/dcgan --device cuda --dataset caltech --data datasets/caltech-w4sub \
  --images-per-epoch 960 --steps 60 --threads 8 --conv-algo own --precision bf16 --conv-algo-cache none \
  --out /tmp/k.csv > $OUT/k/ncu_w5_bf16_step_own.csv 2> $OUT/k/ncu_own.err; echo rc=$?
gzip $OUT/k/ncu_w5_bf16_step_own.csv
echo "== end $(el)s"
