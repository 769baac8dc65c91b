#!/usr/bin/env bash
# accuracy-cuda: W2 (batch 8, 5 epochs) and W3 (batch 128, 12 epochs) on Fashion-MNIST trained
# by pdnn on the GPU (CUDA graph, fp32), seeds one after the other, into
# $RESULTS/pdnn-cuda_{small,keras}-fashion_s<seed>.csv: the GPU half of
# results/mnist/accuracy (the CPU runs there are its reference).
# Prepare: BINS=mnist DATA=fashion-mnist scripts/gpu/prepare.sh. Knobs: SEEDS ("1 2 3").
set -uo pipefail
source "$(dirname "$0")/../host.sh"
need_bin mnist || exit 1
DATA=${DATA:-$BUNDLE/data/fashion-mnist}
for s in ${SEEDS:-1 2 3}; do
  "$BIN/mnist" --device cuda --model small --dataset fashion-mnist --data "$DATA" --batch 8 \
    --epochs 5 --seed "$s" --threads 1 --out "$RESULTS/pdnn-cuda_small-fashion_s$s.csv" \
    > "$RESULTS/small_s$s.log" 2>&1 || echo "small seed $s failed"
  "$BIN/mnist" --device cuda --model keras --dataset fashion-mnist --data "$DATA" --batch 128 \
    --epochs 12 --seed "$s" --threads 1 --out "$RESULTS/pdnn-cuda_keras-fashion_s$s.csv" \
    > "$RESULTS/keras_s$s.log" 2>&1 || echo "keras seed $s failed"
done
grep -h "^epoch" "$RESULTS"/*.log | tail -n 12
