#!/usr/bin/env bash
# s22: W5 fp32 auto, fresh choices against the cache file's: eager step, and per-layer profiles.
set -u
cd "$(dirname "$0")/.."
export BUNDLE=gpu-bundle-s22
source scripts/gpu/host.sh >/dev/null 2>&1
W=$BIN
A=(--dataset caltech --images-per-epoch 960 --data datasets/caltech-w4sub --device cuda --threads 8 --conv-algo auto)
med() { grep step_ms "$1" | grep -o 'median=[0-9.]*'; }
c=$OUT/c.tsv; rm -f "$c"
"$W/dcgan" "${A[@]}" --steps 100 --conv-algo-cache "$c" > "$OUT/g_fresh.log" 2>&1
"$W/dcgan" "${A[@]}" --steps 100 --conv-algo-cache "$c" > "$OUT/g_cached.log" 2>&1
rm -f "$c"
"$W/dcgan" "${A[@]}" --steps 100 --cuda-graph off --conv-algo-cache "$c" > "$OUT/e_fresh.log" 2>&1
"$W/dcgan" "${A[@]}" --steps 100 --cuda-graph off --conv-algo-cache "$c" > "$OUT/e_cached.log" 2>&1
rm -f "$c"
"$W/dcgan" "${A[@]}" --steps 40 --profile --profile-out "$OUT/prof_fresh.csv" --conv-algo-cache "$c" > "$OUT/p_fresh.log" 2>&1
"$W/dcgan" "${A[@]}" --steps 40 --profile --profile-out "$OUT/prof_cached.csv" --conv-algo-cache "$c" > "$OUT/p_cached.log" 2>&1
cp "$c" "$OUT/cache.tsv.txt"
echo "graph fresh $(med $OUT/g_fresh.log) cached $(med $OUT/g_cached.log); eager fresh $(med $OUT/e_fresh.log) cached $(med $OUT/e_cached.log)"
cd "$OUT" && tar czf all.tar.gz *.log *.csv cache.tsv.txt && ls
