#!/usr/bin/env bash
# 18th session, call F: (1) issue 34: `make segment`'s GPU run as the Makefile runs it (the
# binary with SEGMENT_GPU's flags from the repository root, writing runs/segment/, then
# scripts/report/plot.py), never run before: 30 epochs of the 256 px U-Net, batch 4;
# (2) issue 33, item 3: the memory table's PyTorch rows not yet measured on an H200 (896, then
# 1120 and 1344), each a fresh process, cuDNN's autotuner off, as far as the call's time goes.
# Bundle: gpu-bundle-next (a69d890); carry ["gpu-bundle-next","gpu-bundle-cmd"]; park results/
# and datasets/caltech101-6.
set -u
export BUNDLE=gpu-bundle-next
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
source scripts/gpu/host.sh >/dev/null 2>&1
rm -rf runs/segment
flags="--device cuda --size 256 --base 64 --depth 4 --batch 4 --epochs 30"  # Makefile: SEGMENT_GPU
echo "$BIN/segment --threads 8 $flags"
timeout 200 $BIN/segment --threads 8 $flags > $OUT/segment_gpu.log 2>&1
echo "segment rc $? in $(el)s: $(grep -E '^epoch 30/30' $OUT/segment_gpu.log | cut -c1-240)"
python3 scripts/report/plot.py --results runs/segment --out runs/segment/plots > $OUT/plot.log 2>&1
echo "plot rc $?: $(tail -2 $OUT/plot.log)"
tar -czf $OUT/runs-segment.tgz runs/segment
echo "== torch rows $(el)s"
PARTS=torch TORCH_SIDES="896 1120 1344" TORCH_CUDNN_BENCHMARK=off TORCH_WARMUP=1 TORCH_STEPS=3 \
  TORCH_TIMEOUT=150 VISIT_RESULTS=$OUT/m timeout $(( 570 - $(el) )) scripts/gpu/visit.sh memory 2>&1 | tail -14
echo "== end $(el)s"
