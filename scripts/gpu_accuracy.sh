#!/usr/bin/env bash
# Runs on a lent GPU host (16 CPU cores, one GPU), after scripts/gpu_prepare.sh here:
# the Fashion-MNIST accuracy runs of pdnn (on the host's CPU, three seeds side by side, pinned
# to disjoint cores) and of scripts/torch_reference.py (PyTorch on the GPU, same nets, initial
# weights and data order), writing CSV files and logs to $OUT (default results/gpu-run).
#   scripts/gpu_accuracy.sh [SEEDS]      SEEDS default "1 2 3"
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-results/gpu-run}"; mkdir -p "$OUT"
SEEDS="${1:-1 2 3}"
DATA=gpu-bundle/data/fashion-mnist
nseeds=$(echo $SEEDS | wc -w)
per=$(( $(nproc) / (nseeds + 1) ))   # leave one share of cores for PyTorch's host side
[ "$per" -ge 1 ] || per=1

# PyTorch on the GPU, in a subshell without the bundle's LD_LIBRARY_PATH (see env.sh).
# One process per seed, side by side (each draws its dropout masks on the host with numpy).
for s in $SEEDS; do
  python3 scripts/torch_reference.py mnist --model keras --dataset fashion-mnist --data "$DATA" \
    --epochs 12 --seed "$s" --device cuda --threads 1 --out "$OUT/torch_keras_fashion_s$s.csv" \
    > "$OUT/torch_keras_s$s.log" 2>&1 &
done

source gpu-bundle/env.sh
export OMP_PROC_BIND=close
i=0
for s in $SEEDS; do
  first=$(( i * per )); last=$(( first + per - 1 ))
  ( taskset -c "$first-$last" gpu-bundle/bin/mnist --model keras --dataset fashion-mnist \
      --data "$DATA" --epochs 12 --seed "$s" --threads "$per" \
      --out "$OUT/pdnn_keras_fashion_s$s.csv" > "$OUT/pdnn_keras_s$s.log" 2>&1
    taskset -c "$first-$last" gpu-bundle/bin/mnist --model small --dataset fashion-mnist \
      --data "$DATA" --epochs 5 --seed "$s" --threads 1 \
      --out "$OUT/pdnn_small_fashion_s$s.csv" > "$OUT/pdnn_small_s$s.log" 2>&1 ) &
  i=$(( i + 1 ))
done
wait
echo "== logs"; tail -n 3 "$OUT"/*.log
