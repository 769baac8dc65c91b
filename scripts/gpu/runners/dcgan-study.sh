#!/usr/bin/env bash
# dcgan-study: W5 at the study's scale on a lent GPU host, in one visit.
# Prepare: MPI=1 DATA= BINS="dcgan gan_score pdnn_tests" scripts/gpu/prepare.sh
# There: scripts/gpu/visit.sh dcgan-study   (results in $RESULTS, results/gpu-run/dcgan-study)
#   1. the GPU tests of the DCGAN and of its data-parallel noise (CPU parity, graph == eager);
#   2. the study's run and its PyTorch twin (same weights, data order, noise), seed 1: 300
#      epochs of batch 64 on the shipped Caltech photos each, side by side on the GPU, 10,000
#      samples of each scored by the photo judge at the end, the progression PNG of both
#      (epochs 1, 10, 50, 150, 300), the curves (scripts/study/dcgan_quality_photos.sh; about 5
#      minutes on an H100; the PyCUDA study's 9.11 s per epoch would be 46 minutes a run).
#      Three seeds and epochs 50 and 150: the dcgan-quality runner;
#   3. with 2 GPUs and the bundle's mpirun: 2 ranks of --distributed (NCCL), DIST_EPOCHS epochs,
#      against one GPU's epoch times.
# Knobs: EPOCHS (300), DIST_EPOCHS (10); BIN, PYTHON as scripts/gpu/host.sh sets them.
set -uo pipefail
source "$(dirname "$0")/../host.sh"
OUT=$RESULTS
EPOCHS=${EPOCHS:-300}
DIST_EPOCHS=${DIST_EPOCHS:-10}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
need_bin dcgan gan_score pdnn_tests || exit 1
link_datasets
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
t_start=$(date +%s)
stage() { echo "== $* ($(( $(date +%s) - t_start )) s)"; }

stage "1. GPU tests"
"$BIN/pdnn_tests" --gtest_filter='*Dcgan*:*normal_fill*:*NoiseShard*:*prob_mean*' \
  > "$OUT/tests.log" 2>&1
grep -E "^\[  (PASSED|FAILED)|SKIPPED \]|tests ran" "$OUT/tests.log" | tail -8

stage "2. the study's run, pdnn and PyTorch, $EPOCHS epochs each"
# IMAGES_PER_EPOCH=0: the whole set (2,600 photos, 41 iterations), with or without the apps'
# default that adapts to a smaller set.
BIN="$BIN" PYTHON="$PY" DATASET=caltech EPOCHS="$EPOCHS" DEVICE=cuda THREADS=8 JOBS=2 SEEDS=1 \
  SCORE_EPOCHS="$EPOCHS" SAMPLES=10000 IMAGES_PER_EPOCH=0 OUT="$OUT" WORK=/tmp/dcgan-study \
  GRIDS=/tmp/dcgan-study/grids \
  scripts/study/dcgan_quality.sh > "$OUT/study.log" 2>&1
grep -E "^== |^  (pdnn|torch) seed|^    [0-9]+ epochs|^(framework|pdnn|torch|real-test) |progression|dcgan_quality|rror" "$OUT/study.log"

if [ "$(nvidia-smi -L | grep -c '^GPU')" -ge 2 ] && [ -x "$BIN/mpirun" ]; then
  stage "3. data-parallel: 2 GPUs, $DIST_EPOCHS epochs"
  for ranks in 1 2; do
    "$BIN/mpirun" --allow-run-as-root --bind-to none -np "$ranks" "$BIN/dcgan" --device cuda \
      --dataset caltech --images-per-epoch 0 --epochs "$DIST_EPOCHS" --threads 4 --distributed \
      --out "$OUT/dist_${ranks}gpu.csv" --iterations-out "$OUT/dist_${ranks}gpu_iterations.csv" \
      --samples-dir "$OUT/samples/dist_${ranks}gpu" > "$OUT/dist_${ranks}gpu.log" 2>&1
    grep -E "^distributed|^epoch $DIST_EPOCHS/|rror" "$OUT/dist_${ranks}gpu.log"
  done
else
  echo "(3. data-parallel skipped: needs 2 GPUs and MPI=1 in gpu_prepare.sh)"
fi
env -u LD_LIBRARY_PATH "$PY" scripts/report/plot.py --results "$OUT" --out "$OUT/plots" | grep -c wrote
stage "done: $OUT"
