#!/usr/bin/env bash
# 16th session, call 3, issue 32: every kernel of W5's bf16 step (own), timed alone by ncu.
# Call 2 profiled from the first launch, so the algorithm timing ran under ncu and chose badly
# (implicit GEMM everywhere): here the first 6000 launches (loading, selection, capture, ~40
# steps) run unprofiled, then 420 launches (3 steps of 139) are timed. Its first try (same
# name, 05:3x UTC) read call 2's choices, made under ncu, from ~/.cache/pdnn/algorithms.tsv
# (the warm host kept it): --conv-algo-cache none, and the file removed first.
# Prepare: BINS="segment dcgan" DATA= scripts/gpu/prepare.sh (main 3fffa31);
# carry ["gpu-bundle","gpu-bundle-cmd","datasets/caltech-w4sub"]
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
source scripts/gpu/host.sh >/dev/null 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -n1)
mkdir -p $OUT/k
ls -la ~/.cache/pdnn/ 2>/dev/null; rm -rf ~/.cache/pdnn
for algo in own; do
echo "== ncu W5 bf16 step kernels ($algo) $(el)s"
timeout 240 $NCU --metrics gpu__time_duration.sum --csv --launch-skip 6000 --launch-count 420 \
  $BIN/dcgan --device cuda --dataset caltech --data datasets/caltech-w4sub \
  --images-per-epoch 960 --steps 60 --threads 8 --conv-algo $algo --precision bf16 --conv-algo-cache none \
  --out /tmp/k.csv > $OUT/k/ncu_w5_bf16_step_$algo.csv 2> $OUT/k/ncu_$algo.err; echo rc=$?
grep -c adam_k $OUT/k/ncu_w5_bf16_step_$algo.csv; grep "conv algorithm" $OUT/k/ncu_w5_bf16_step_$algo.csv | head -60 > $OUT/k/algos_$algo.txt
gzip $OUT/k/ncu_w5_bf16_step_$algo.csv
done
echo "== plain run for the algorithm choices and the step $(el)s"
timeout 60 $BIN/dcgan --device cuda --dataset caltech --data datasets/caltech-w4sub \
  --images-per-epoch 960 --steps 200 --threads 8 --conv-algo own --precision bf16 --conv-algo-cache none \
  --out /tmp/k2.csv > $OUT/k/plain_own.log 2>&1; echo rc=$?; grep -i "ms\b.*step\|step.*ms" $OUT/k/plain_own.log | tail -3
echo "== end $(el)s"
