#!/usr/bin/env bash
# bench: ms per training step on the GPU, pdnn against PyTorch in the same run (the
# `make bench-gpu` measurement: scripts/bench/bench_gpu.sh; W2 b8, W2 b128, W3 eager and CUDA graph,
# fp32 and TF32, pi on the GPU) -> $RESULTS/gpu.csv and $RESULTS/pi_gpu.csv.
# Prepare: BINS="mnist pi" DATA=mnist-npm10k scripts/gpu/prepare.sh (add caltech101 and
# WORKLOADS="W2b8 W2b128 W3 W4" for W4; its photos travel in the tree).
# Knobs: WORKLOADS, STEPS (300), TORCH (1), PI (1): scripts/bench/bench_gpu.sh's.
set -uo pipefail
source "$(dirname "$0")/../host.sh"
need_bin mnist || exit 1
BIN=$BIN PYTHON=$PYTHON DATA=${DATA:-$BUNDLE/data/mnist-npm10k} OUT="$RESULTS/gpu.csv" \
  scripts/bench/bench_gpu.sh
