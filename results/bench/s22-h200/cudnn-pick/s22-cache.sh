#!/usr/bin/env bash
# s22: is a run that reads its algorithm choices from the cache file slower than the run that
# timed them? W5 fp32/bf16 auto and own, graph: fresh (writes the file), then from the file, x2.
set -u
cd "$(dirname "$0")/.."
export BUNDLE=gpu-bundle-s22
source scripts/gpu/host.sh >/dev/null 2>&1
W=$BIN
A=(--dataset caltech --images-per-epoch 960 --data datasets/caltech-w4sub --device cuda --steps 100 --threads 8)
med() { grep step_ms "$1" | grep -o 'median=[0-9.]*'; }
for cfg in "auto fp32" "own fp32" "auto bf16"; do
  set -- $cfg
  c=$OUT/cache_$1_$2.tsv; rm -f "$c"
  line="$1 $2:"
  for r in fresh cached fresh2 cached2; do
    [ "$r" = fresh2 ] && rm -f "$c"
    "$W/dcgan" "${A[@]}" --conv-algo "$1" --precision "$2" --conv-algo-cache "$c" > "$OUT/${1}_${2}_$r.log" 2>&1
    line="$line $r $(med "$OUT/${1}_${2}_$r.log")"
  done
  echo "$line"
done
