#!/usr/bin/env bash
# s22 call 4: W5 at the code submitted (3092071's kernels = main ba9ceac), pdnn and PyTorch 2.11
# in one command, 2 rounds alternating: pdnn bf16 own/auto, TF32 auto (CUDA graph, the photo
# subset, each run timing its own choices); PyTorch graph, autocast bf16 + channels_last and TF32.
set -u
cd "$(dirname "$0")/.."
export BUNDLE=gpu-bundle-s22
source scripts/gpu/host.sh >/dev/null 2>&1
R=$OUT/w5
mkdir -p "$R"
for r in 1 2; do
  for pp in "own bf16" "auto bf16" "auto tf32"; do
    set -- $pp
    timeout 100 "$BIN/dcgan" --device cuda --dataset caltech --images-per-epoch 960 --steps 100 \
      --threads 8 --conv-algo "$1" --precision "$2" --data datasets/caltech-w4sub \
      --conv-algo-cache none --bench-csv "$R/steps.csv" > "$R/pdnn_$1_$2_r$r.log" 2>&1
    echo "pdnn W5 $1 $2 r$r: $(grep '^step_ms' "$R/pdnn_$1_$2_r$r.log" | grep -o 'median=[0-9.]*')"
  done
  timeout 120 env -u LD_LIBRARY_PATH "$PYTHON" scripts/twins/torch_gpu_bench.py --workloads W5 \
    --modes graph --precisions bf16,tf32 --steps 100 --out "$R/torch.csv" > "$R/torch_r$r.log" 2>&1
  grep "median" "$R/torch_r$r.log"
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$R/gpu.txt"
cat gpu-bundle-s22/REVISION >> "$R/gpu.txt"
tar czf "$OUT/w5.tar.gz" -C "$OUT" w5 && rm -rf "$R"
