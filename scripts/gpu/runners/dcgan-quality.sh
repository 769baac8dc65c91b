#!/usr/bin/env bash
# dcgan-quality: W5's sample quality against the PyTorch twin at the study's scale (issue 27) on
# a lent GPU host: scripts/study/dcgan_quality_photos.sh on the shipped photos, 300 epochs per run,
# 10,000 colour samples after epochs 50, 150 and 300, scored by the committed photo judge
# (results/dcgan/judge/photo64_caltech101-6.ckpt) on the GPU.
# Prepare:  BINS="dcgan gan_score" DATA= scripts/gpu/prepare.sh  (the judge is committed)
# There, the 3 seeds x 2 frameworks in two commands (each about 6-7 minutes on an H100):
#   PARTS="pdnn score"  scripts/gpu/visit.sh dcgan-quality
#   PARTS="torch score" scripts/gpu/visit.sh dcgan-quality
# (PARTS="pdnn torch score summary" does all in one, about 13 minutes: more than one command
# of the device tool may run; SEEDS="1" or "2 3" splits by seed instead). Each writes
# to $RESULTS: quality_caltech101-6_<parts>.csv (gan_score's rows: sets pdnn-s1-e050 ...,
# real-heldout: the ceiling), per run the epoch and iteration CSVs and its log, the grids of
# epochs 1, 10, 50, 150 and 300 under samples/ (the others, and the 123 MB sample files, stay in
# /tmp/dcgan-quality), gpu.txt; with "summary" in PARTS the table and the progressions too.
# Here, after both: copy both result folders into one (their file names differ), then
#   PARTS=summary OUT=<folder> QUALITY="<folder>/quality_caltech101-6_pdnn_score.csv
#     <folder>/quality_caltech101-6_torch_score.csv" scripts/study/dcgan_quality_photos.sh
# writes quality_caltech101-6_summary.csv (mean, std, min, max over seeds per framework and
# epoch, pdnn's FID over PyTorch's) and progression_caltech101-6_s<seed>.png.
# Timing (to plan the visit): pdnn's 300 epochs are 90 s of training on an H100 (7.3 ms an
# iteration, the GPU busy: results/README.md, the study's run) plus its per-epoch grids and rows;
# PyTorch's eager twin about 12.5 ms an iteration alone (its GPU work ~8 ms). JOBS (3) runs share
# the GPU, so a command costs about the sum of its runs' GPU work: 3 x 12,300 iterations x
# 7.3 ms = 4.5 min for pdnn, x ~8 ms = 5 min for PyTorch, plus start-up, samples and scoring.
# Knobs: PARTS (above), SEEDS (1 2 3), EPOCHS (300), SCORE_EPOCHS (50,150,300), SAMPLES
# (10000), JOBS (3), THREADS (12: 4 per run), PRECISION (fp32; bf16 or tf32: pdnn's --precision,
# tf32 also the twin's; bf16 is pdnn's alone), and PYTHON, BIN as host.sh sets them.
# Issue 32's bf16 quality, beside the fp32 runs of results/dcgan/quality-caltech-h200/ (same
# seeds, so the same initial weights, data order and noise):
#   PRECISION=bf16 PARTS="pdnn score" scripts/gpu/visit.sh dcgan-quality
# about 5-6 minutes on an H100 (pdnn fp32's took 308 s on an H200; bf16 steps are shorter, the
# grids, samples and scoring the same) -> quality_caltech101-6_bf16_pdnn_score.csv (sets
# pdnn-bf16-s<seed>-e<epoch>), dcgan_caltech101-6_bf16_s<seed>.csv and _iterations.csv,
# pdnn-bf16_caltech101-6_s<seed>.log, samples/caltech101-6_bf16_s<seed>/. Here, with the visit's
# files copied into results/dcgan/quality-caltech-bf16/:
#   PRECISION=bf16 PARTS=summary OUT=results/dcgan/quality-caltech-bf16 \
#     QUALITY="results/dcgan/quality-caltech-h200/quality_caltech101-6_pdnn_score.csv
#       results/dcgan/quality-caltech-h200/quality_caltech101-6_torch_score.csv
#       results/dcgan/quality-caltech-bf16/quality_caltech101-6_bf16_pdnn_score.csv" \
#     RUNS="results/dcgan/quality-caltech-bf16 results/dcgan/quality-caltech-h200" \
#     scripts/study/dcgan_quality_photos.sh
# writes quality_caltech101-6_bf16_summary.csv (pdnn-bf16's FID analogue over pdnn fp32's per
# epoch, column fid_ratio_to_fp32, and the verdict at epoch 300: <= 1.10), curves_caltech101-6_
# bf16.png (losses and D outputs per epoch over seeds: pdnn fp32, pdnn bf16, PyTorch) and
# progression_caltech101-6_bf16_s<seed>.png (pdnn bf16's grids; fp32's grids were not kept, its
# progressions are the folder's progression_caltech101-6_s<seed>.png, the same fixed noise).
set -uo pipefail
source "$(dirname "$0")/../host.sh"
OUT=$RESULTS
PARTS=${PARTS:-pdnn score}
PRECISION=${PRECISION:-fp32}
JOBS=${JOBS:-3}
THREADS=${THREADS:-12}
need_bin dcgan gan_score || exit 1
work=/tmp/dcgan-quality
mkdir -p "$work/grids" "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
tag=$([ "$PRECISION" = fp32 ] || echo "${PRECISION}_")$(echo "$PARTS" | tr ' ' '_')
stage "dcgan_quality_photos.sh PARTS=\"$PARTS\" PRECISION=$PRECISION SEEDS=\"${SEEDS:-1 2 3}\" JOBS=$JOBS"
BIN="$BIN" PYTHON="$PYTHON" DEVICE=cuda THREADS="$THREADS" JOBS="$JOBS" PARTS="$PARTS" PRECISION="$PRECISION" \
  OUT="$OUT" WORK="$work" GRIDS="$work/grids" QUALITY_CSV="$OUT/quality_caltech101-6_$tag.csv" \
  scripts/study/dcgan_quality_photos.sh
status=$?
# The grids the progressions show, in the layout the summary step reads (GRIDS=$OUT/samples).
for d in "$work"/grids/*/; do
  [ -d "$d" ] || continue
  mkdir -p "$OUT/samples/$(basename "$d")"
  for e in 001 010 050 150 300; do
    [ -f "$d/epoch_$e.png" ] && cp "$d/epoch_$e.png" "$OUT/samples/$(basename "$d")/"
  done
  last=$(find "$d" -name 'epoch_*.png' | sort | tail -n1)
  [ -n "$last" ] && cp "$last" "$OUT/samples/$(basename "$d")/"
done
stage "done (status $status): $OUT"
exit $status
