#!/usr/bin/env bash
# s22: cuDNN's pick kept in the algorithm cache (branch cudnn-pick-cache): its GPU tests, then
# W5 fp32 auto (graph) fresh against from the file, twice, on the shipped photos.
set -u
cd "$(dirname "$0")/.."
export BUNDLE=gpu-bundle-pick
FILTER='ConvGpu.Cudnn*:ConvGpu.Choice*:ConvGpu.RunWithTheCache*:Tuning.*:ConvGpu.EveryAlgorithmAndPass*' \
  timeout 200 bash scripts/gpu/visit.sh tests
source scripts/gpu/host.sh >/dev/null 2>&1
W=$BIN
A=(--dataset caltech --images-per-epoch 0 --device cuda --threads 8 --conv-algo auto --steps 200)
med() { grep step_ms "$1" | grep -o 'median=[0-9.]*'; }
c=$OUT/c.tsv
for r in 1 2; do
  rm -f "$c"
  "$W/dcgan" "${A[@]}" --conv-algo-cache "$c" > "$OUT/fresh_r$r.log" 2>&1
  "$W/dcgan" "${A[@]}" --conv-algo-cache "$c" > "$OUT/cached_r$r.log" 2>&1
  echo "r$r fresh $(med $OUT/fresh_r$r.log) cached $(med $OUT/cached_r$r.log)"
done
cp "$c" "$OUT/cache.tsv.txt"; grep -c cudnn-pick "$c"
cd "$OUT" && tar czf pick.tar.gz *.log cache.tsv.txt && rm -f *.log c.tsv
