#!/usr/bin/env bash
# s23 call D (nvidia-h200): W4 and W5 at the code submitted (3f6cf43's kernels: the bundle built
# from 21fd525 + the grouped split sum + idle bww warps), pdnn and PyTorch 2.11 in one command,
# 2 rounds alternating: pdnn bf16 own/auto, TF32 auto (CUDA graph, the photo subset, each run
# timing its own choices); PyTorch autocast bf16 + channels_last (graph, torch.compile; W5's
# compile fails in 2.11 with channels_last) and TF32 graph.
set -u
export BUNDLE=gpu-bundle-busy
source scripts/gpu/host.sh >/dev/null 2>&1
R=$OUT/w45
mkdir -p "$R"
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
for r in 1 2; do
  for pp in "own bf16" "auto bf16" "auto tf32"; do
    set -- $pp
    timeout 100 "$BIN/caltech101" --device cuda --steps 60 --threads 8 --conv-algo "$1" \
      --precision "$2" --data datasets/caltech-w4sub --images-per-epoch 448 \
      --conv-algo-cache none --bench-csv "$R/steps.csv" > "$R/pdnn_W4_$1_$2_r$r.log" 2>&1
    echo "pdnn W4 $1 $2 r$r: $(grep '^step_ms' "$R/pdnn_W4_$1_$2_r$r.log" | grep -o 'median=[0-9.]*')"
    timeout 100 "$BIN/dcgan" --device cuda --dataset caltech --images-per-epoch 960 --steps 100 \
      --threads 8 --conv-algo "$1" --precision "$2" --data datasets/caltech-w4sub \
      --conv-algo-cache none --bench-csv "$R/steps.csv" > "$R/pdnn_W5_$1_$2_r$r.log" 2>&1
    echo "pdnn W5 $1 $2 r$r: $(grep '^step_ms' "$R/pdnn_W5_$1_$2_r$r.log" | grep -o 'median=[0-9.]*')"
  done
  echo "== pdnn r$r $(el)s"
  if [ "$(el)" -lt 330 ]; then
    timeout 200 env -u LD_LIBRARY_PATH "$PYTHON" scripts/twins/torch_gpu_bench.py --workloads W4 \
      --modes compile --precisions bf16 --steps 60 --out "$R/torch.csv" > "$R/torch_w4_bf16_r$r.log" 2>&1
  else echo "round $r: torch.compile left out (time)" > "$R/torch_w4_bf16_r$r.log"; fi
  timeout 100 env -u LD_LIBRARY_PATH "$PYTHON" scripts/twins/torch_gpu_bench.py --workloads W4,W5 \
    --modes graph --precisions tf32,bf16 --steps 60 --out "$R/torch.csv" > "$R/torch_graph_r$r.log" 2>&1
  grep -h "median" "$R/torch_w4_bf16_r$r.log" "$R/torch_graph_r$r.log"
  echo "== torch r$r $(el)s"
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$R/gpu.txt"
cat gpu-bundle-busy/REVISION >> "$R/gpu.txt"
tar czf "$OUT/w45.tar.gz" -C "$OUT" w45 && rm -rf "$R"
