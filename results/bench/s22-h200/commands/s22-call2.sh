#!/usr/bin/env bash
# s22 call 2: W5 im2col passes, then W4/W5 steps, branch s22 (3092071) against main (70535d8),
# alternating, then PyTorch's W5 (CUDA graph) in the same command.
set -u
cd "$(dirname "$0")/.."
export BUNDLE=gpu-bundle-s22
BEFORE=gpu-bundle-main22 FILTERS="W5" ALGOS="im2col" PRECISIONS="bf16,tf32" ROUNDS=2 REPEAT=10 \
  timeout 150 bash scripts/gpu/visit.sh conv-ab
BEFORE=gpu-bundle-main22 WORKLOADS="W5" POLICIES="own auto" PRECISIONS="bf16" ROUNDS=2 \
  W5_ARGS="--data datasets/caltech-w4sub --conv-algo-cache none" W5_IMAGES=960 \
  timeout 200 bash scripts/gpu/visit.sh ab-steps
BEFORE=gpu-bundle-main22 WORKLOADS="W5 W4" POLICIES="auto" PRECISIONS="tf32" ROUNDS=2 \
  W5_ARGS="--data datasets/caltech-w4sub --conv-algo-cache none" W5_IMAGES=960 \
  W4_ARGS="--data datasets/caltech-w4sub --images-per-epoch 448 --conv-algo-cache none" \
  timeout 150 bash scripts/gpu/visit.sh ab-steps
source scripts/gpu/host.sh >/dev/null 2>&1
timeout 90 py scripts/twins/torch_gpu_bench.py --workloads W5 --modes graph --precisions bf16,tf32 \
  --steps 100 --out "$OUT/torch_w5.csv" > "$OUT/torch_w5.log" 2>&1; tail -5 "$OUT/torch_w5.log"
ls -la "$OUT"
