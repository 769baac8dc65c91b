#!/usr/bin/env bash
# Accuracy side by side with PyTorch (issue: MNIST experiment): for each workload and seed,
# trains pdnn (build/bin/mnist) and scripts/twins/torch_reference.py (same nets, initial weights,
# optimizer and data order) and writes one CSV per framework, workload and seed under
# runs/mnist/accuracy/ (OUT; rows per epoch, DESIGN.md columns), then the summary
# (scripts/report/accuracy_summary.py).
#   scripts/study/accuracy_mnist.sh [WORKLOAD...]   WORKLOAD: small-npm10k small-fashion keras-fashion
#   SEEDS="1 2 3" THREADS=1 BIN=build/bin PYTHON=/usr/bin/python3
# On 2 cores keras-fashion takes about an hour per framework and seed: scripts/gpu/runners/accuracy.sh
# runs it on a lent GPU host instead (pdnn on the host CPU, PyTorch on the GPU).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-build/bin}; PY=${PYTHON:-/usr/bin/python3}; SEEDS=${SEEDS:-1 2 3}; THREADS=${THREADS:-1}
OUT=${OUT:-runs/mnist/accuracy}
mkdir -p "$OUT"
[ $# -gt 0 ] || set -- small-npm10k small-fashion keras-fashion
for w in "$@"; do
  case "$w" in
    small-npm10k)  args=(--model small --epochs 5 --batch 8 --data datasets/mnist-npm10k) ;;
    small-fashion) args=(--model small --epochs 5 --batch 8 --dataset fashion-mnist) ;;
    keras-fashion) args=(--model keras --epochs 12 --batch 128 --dataset fashion-mnist) ;;
    *) echo "accuracy_mnist: unknown workload '$w' (small-npm10k small-fashion keras-fashion)" >&2; exit 2 ;;
  esac
  for s in $SEEDS; do
    echo "== $w seed $s"
    "$BIN/mnist" "${args[@]}" --seed "$s" --threads "$THREADS" --out "$OUT/pdnn_${w}_s$s.csv"
    "$PY" scripts/twins/torch_reference.py mnist "${args[@]}" --seed "$s" --threads "$THREADS" \
      --out "$OUT/torch_${w}_s$s.csv"
  done
done
"$PY" scripts/report/accuracy_summary.py "$OUT"
