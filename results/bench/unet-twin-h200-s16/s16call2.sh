#!/usr/bin/env bash
# 16th session, call 2. (1) issue 32: every kernel of W5's bf16 step (own), timed alone by ncu
# (graph nodes profiled one by one), to split the 2.3 ms step into convolutions, BatchNorm,
# elementwise, loss, optimizer. (2) issue 34: U-Net seeds 4-6 beside the twin.
# Prepare: BINS="segment dcgan" DATA= scripts/gpu/prepare.sh (main 3fffa31);
# carry ["gpu-bundle","gpu-bundle-cmd","datasets/caltech-w4sub"]
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
source scripts/gpu/host.sh >/dev/null 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -n1)
mkdir -p $OUT/k
echo "== ncu W5 bf16 step kernels $(el)s"
timeout 200 $NCU --metrics gpu__time_duration.sum --csv --launch-count 2500 \
  $BIN/dcgan --device cuda --dataset caltech --data datasets/caltech-w4sub \
  --images-per-epoch 960 --steps 5 --threads 8 --conv-algo own --precision bf16 \
  --out /tmp/k.csv > $OUT/k/ncu_w5_bf16_step.csv 2> $OUT/k/ncu.err; echo rc=$?
wc -l $OUT/k/ncu_w5_bf16_step.csv; tail -3 $OUT/k/ncu.err
gzip $OUT/k/ncu_w5_bf16_step.csv
echo "== segment seeds 4-6 $(el)s"
PARTS=accuracy SEEDS="4 5 6" VISIT_RESULTS=$OUT/v1 timeout 300 scripts/gpu/visit.sh segment 2>&1 | tail -12
echo "== end $(el)s"
