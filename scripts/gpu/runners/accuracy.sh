#!/usr/bin/env bash
# accuracy: the Fashion-MNIST accuracy runs of pdnn on the host's CPU (W3 12 epochs and W2 5
# epochs per seed, seeds side by side pinned to disjoint cores) and of
# scripts/twins/torch_reference.py (PyTorch on the GPU, same nets, initial weights and data order),
# CSV files and logs -> $RESULTS. Prepare: BINS=mnist DATA=fashion-mnist scripts/gpu/prepare.sh
# Knobs: SEEDS ("1 2 3").
set -uo pipefail
source "$(dirname "$0")/../host.sh"
need_bin mnist || exit 1
SEEDS=${SEEDS:-1 2 3}
DATA=$BUNDLE/data/fashion-mnist
nseeds=$(echo $SEEDS | wc -w)
per=$(( $(nproc) / (nseeds + 1) ))   # leave one share of cores for PyTorch's host side
[ "$per" -ge 1 ] || per=1
# PyTorch on the GPU, one process per seed, side by side (each draws its dropout masks on the
# host with numpy).
for s in $SEEDS; do
  py scripts/twins/torch_reference.py mnist --model keras --dataset fashion-mnist --data "$DATA" \
    --epochs 12 --seed "$s" --device cuda --threads 1 --out "$RESULTS/torch_keras_fashion_s$s.csv" \
    > "$RESULTS/torch_keras_s$s.log" 2>&1 &
done
export OMP_PROC_BIND=close
i=0
for s in $SEEDS; do
  first=$(( i * per )); last=$(( first + per - 1 ))
  ( taskset -c "$first-$last" "$BIN/mnist" --model keras --dataset fashion-mnist \
      --data "$DATA" --epochs 12 --seed "$s" --threads "$per" \
      --out "$RESULTS/pdnn_keras_fashion_s$s.csv" > "$RESULTS/pdnn_keras_s$s.log" 2>&1
    taskset -c "$first-$last" "$BIN/mnist" --model small --dataset fashion-mnist \
      --data "$DATA" --epochs 5 --seed "$s" --threads 1 \
      --out "$RESULTS/pdnn_small_fashion_s$s.csv" > "$RESULTS/pdnn_small_s$s.log" 2>&1 ) &
  i=$(( i + 1 ))
done
wait
echo "== logs"; tail -n 3 "$RESULTS"/*.log
