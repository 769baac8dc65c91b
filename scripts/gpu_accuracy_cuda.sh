#!/usr/bin/env bash
# On a GPU host (after scripts/gpu_prepare.sh here with DATA=fashion-mnist): W2 (batch 8,
# 5 epochs) and W3 (batch 128, 12 epochs) on Fashion-MNIST trained by pdnn on the GPU (CUDA
# graph, fp32), seeds 1 2 3, one after the other, into $OUT/pdnn-cuda_{small,keras}-fashion_s<seed>.csv:
# the GPU half of results/mnist/accuracy (the CPU runs there are its reference).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-results/gpu-run}"; mkdir -p "$OUT"
BIN=${BIN:-/tmp/w}
DATA=${DATA:-gpu-bundle/data/fashion-mnist}
for s in ${SEEDS:-1 2 3}; do
  "$BIN/mnist" --device cuda --model small --dataset fashion-mnist --data "$DATA" --batch 8 \
    --epochs 5 --seed "$s" --threads 1 --out "$OUT/pdnn-cuda_small-fashion_s$s.csv" \
    > "$OUT/small_s$s.log" 2>&1 || echo "small seed $s failed"
  "$BIN/mnist" --device cuda --model keras --dataset fashion-mnist --data "$DATA" --batch 128 \
    --epochs 12 --seed "$s" --threads 1 --out "$OUT/pdnn-cuda_keras-fashion_s$s.csv" \
    > "$OUT/keras_s$s.log" 2>&1 || echo "keras seed $s failed"
done
grep -h "^epoch" "$OUT"/*.log | tail -n 12
