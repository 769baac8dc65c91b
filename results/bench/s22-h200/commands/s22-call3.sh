#!/usr/bin/env bash
# s22 call 3: W4 TF32 own (and bf16 auto, the control) of branch s22 (3092071) against main
# (70535d8), alternating; then PyTorch 2.11's W5 (CUDA graph; autocast bf16 + channels_last,
# and TF32) in the same command.
set -u
cd "$(dirname "$0")/.."
export BUNDLE=gpu-bundle-s22
BEFORE=gpu-bundle-main22 WORKLOADS="W4" POLICIES="own" PRECISIONS="tf32 bf16" ROUNDS=2 \
  W4_ARGS="--data datasets/caltech-w4sub --images-per-epoch 448 --conv-algo-cache none" \
  timeout 200 bash scripts/gpu/visit.sh ab-steps
source scripts/gpu/host.sh >/dev/null 2>&1
timeout 150 env -u LD_LIBRARY_PATH "$PYTHON" scripts/twins/torch_gpu_bench.py --workloads W5 \
  --modes graph --precisions bf16,tf32 --steps 100 --out "$OUT/torch_w5.csv" > "$OUT/torch_w5.log" 2>&1
tail -8 "$OUT/torch_w5.log"
ls -la "$OUT"
