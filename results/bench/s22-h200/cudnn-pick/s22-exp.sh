#!/usr/bin/env bash
# s22 experiment: cuDNN's find lists in a fresh run and in a run from the cache file, W5 fp32
# auto (graph), and the same with the find run twice (PDNN_EXP_FIND_TWICE: the first a warm-up).
set -u
cd "$(dirname "$0")/.."
export BUNDLE=gpu-bundle-exp
source scripts/gpu/host.sh >/dev/null 2>&1
W=$BIN
A=(--dataset caltech --images-per-epoch 960 --data datasets/caltech-w4sub --device cuda --threads 8 --conv-algo auto --steps 100)
med() { grep step_ms "$1" | grep -o 'median=[0-9.]*'; }
c=$OUT/c.tsv
for twice in 0 1; do
  rm -f "$c"
  [ $twice = 1 ] && export PDNN_EXP_FIND_TWICE=1
  "$W/dcgan" "${A[@]}" --conv-algo-cache "$c" > "$OUT/fresh_t$twice.log" 2>&1
  "$W/dcgan" "${A[@]}" --conv-algo-cache "$c" > "$OUT/cached_t$twice.log" 2>&1
  "$W/dcgan" "${A[@]}" --conv-algo-cache "$c" > "$OUT/cached2_t$twice.log" 2>&1
  echo "twice=$twice fresh $(med $OUT/fresh_t$twice.log) cached $(med $OUT/cached_t$twice.log) cached2 $(med $OUT/cached2_t$twice.log)"
done
cd "$OUT" && grep -h "EXP cudnn find forward" fresh_t0.log | head -3; echo; grep -h "EXP cudnn find forward" cached_t0.log | head -3
tar czf exp.tar.gz *.log && rm -f *.log c.tsv
