#!/usr/bin/env bash
# s22: is W5's two-GPU overhead in graph mode communication or two processes sharing the host?
# 1 GPU alone (card 0, card 1), then two independent 1-GPU runs at once (no communication),
# then the 2-rank run, 2 rounds.
set -u
cd "$(dirname "$0")/.."
export BUNDLE=gpu-bundle-dist22
source scripts/gpu/host.sh >/dev/null 2>&1
export NCCL_NVLS_ENABLE=0
W=$BIN
A=(--dataset caltech --images-per-epoch 0 --device cuda --steps 200)
med() { grep step_ms "$1" | grep -o 'median=[0-9.]*'; }
for r in 1 2; do
  CUDA_VISIBLE_DEVICES=0 "$W/dcgan" "${A[@]}" --batch 64 --threads 16 > "$OUT/alone0_r$r.log" 2>&1
  CUDA_VISIBLE_DEVICES=1 "$W/dcgan" "${A[@]}" --batch 64 --threads 16 > "$OUT/alone1_r$r.log" 2>&1
  CUDA_VISIBLE_DEVICES=0 "$W/dcgan" "${A[@]}" --batch 64 --threads 16 > "$OUT/pair0_r$r.log" 2>&1 &
  CUDA_VISIBLE_DEVICES=1 "$W/dcgan" "${A[@]}" --batch 64 --threads 16 > "$OUT/pair1_r$r.log" 2>&1
  wait
  "$W/mpirun" -np 2 --bind-to none -x NCCL_NVLS_ENABLE -x PDNN_NCCL_LIBRARY "$W/dcgan" "${A[@]}" \
    --batch 128 --distributed > "$OUT/ranks2_r$r.log" 2>&1
  echo "r$r alone0 $(med $OUT/alone0_r$r.log) alone1 $(med $OUT/alone1_r$r.log) pair0 $(med $OUT/pair0_r$r.log) pair1 $(med $OUT/pair1_r$r.log) 2ranks $(med $OUT/ranks2_r$r.log)"
done
