#!/usr/bin/env bash
# 16th session, call 5, issue 32: d04e4c2 (both im2col permutes flat), ce21b23 (the cache key),
# 164ff4b (Backends on im2col), e5df2c2 (bench_kernels BN splits) on top of call 4's, against main 3fffa31.
# (1) the GPU tests of what changed; (2) W5's step, bf16 own/auto and TF32 own, the builds
# alternating; (3) every kernel of W5's bf16 step under ncu (as call 3), to check each
# prediction kernel by kernel.
# Prepare: BINS="bench_conv_gpu dcgan pdnn_tests bench_kernels" DATA= BUNDLE=gpu-bundle-new scripts/gpu/prepare.sh
# (at e5df2c2); gpu-bundle-before = main 3fffa31 (bench_conv_gpu dcgan, bin only);
# carry ["gpu-bundle-new","gpu-bundle-before","gpu-bundle-cmd","datasets/caltech-w4sub"]
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
BEFORE=gpu-bundle-before WORKLOADS=W5 PRECISIONS="bf16 tf32" POLICIES="own auto" ROUNDS=2 \
  W5_ARGS="--data datasets/caltech-w4sub --conv-algo-cache none" W5_IMAGES=960 VISIT_RESULTS=$OUT/v2 \
  timeout 200 scripts/gpu/visit.sh ab-steps 2>&1 | tail -6
mkdir -p $OUT/k
echo "== bench_kernels (BatchNorm splits) $(el)s"
timeout 60 $BIN/bench_kernels --repeat 50 --warmup 10 --out $OUT/k/gpu_launch.csv 2>&1 | tail -22
echo "== ncu W5 bf16 step kernels $(el)s"
timeout 120 $NCU --metrics gpu__time_duration.sum --csv --launch-skip 6000 --launch-count 420 \
  $BIN/dcgan --device cuda --dataset caltech --data datasets/caltech-w4sub \
  --images-per-epoch 960 --steps 60 --threads 8 --conv-algo own --precision bf16 --conv-algo-cache none \
  --out /tmp/k.csv > $OUT/k/ncu_w5_bf16_step_own.csv 2> $OUT/k/ncu_own.err; echo rc=$?
gzip $OUT/k/ncu_w5_bf16_step_own.csv
echo "== end $(el)s"
