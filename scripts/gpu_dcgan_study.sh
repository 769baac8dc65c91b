#!/usr/bin/env bash
# gpu_dcgan_study.sh: W5 at the study's scale on a lent GPU host, in one visit, after
#   MPI=1 DATA= BINS="dcgan gan_score mnist pdnn_tests" scripts/gpu_prepare.sh
# here. There, from the same checkout path: scripts/gpu_dcgan_study.sh   (OUT=... for the folder)
#   1. the GPU tests of the DCGAN and of its data-parallel noise (CPU parity, graph == eager);
#   2. the study's run and its PyTorch twin (same weights, data order, noise): 300 epochs of
#      batch 64 on the shipped Caltech photos each, the progression PNG of both (epochs 1, 10,
#      50, 150, 300), the curves (scripts/dcgan_quality.sh DATASET=caltech; about 4 minutes
#      each on an H100, the PyCUDA study's 9.11 s per epoch would be 46 minutes);
#   3. with 2 GPUs and the bundle's mpirun: 2 ranks of --distributed (NCCL), DIST_EPOCHS epochs,
#      against one GPU's epoch times.
# Environment: OUT (results/dcgan/gpu-study), BIN (/tmp/pdnn-gpu-bin), EPOCHS (300),
# DIST_EPOCHS (10), PYTHON (python3).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/dcgan/gpu-study}
BIN=${BIN:-/tmp/pdnn-gpu-bin}
EPOCHS=${EPOCHS:-300}
DIST_EPOCHS=${DIST_EPOCHS:-10}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
[ -x "$BIN/dcgan" ] || scripts/gpu_wrap.sh "$BIN"
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
BIN="$BIN" PYTHON="$PY" DATASET=caltech EPOCHS="$EPOCHS" DEVICE=cuda THREADS=4 SAMPLES=64 \
  IMAGES_PER_EPOCH=0 OUT="$OUT" scripts/dcgan_quality.sh > "$OUT/study.log" 2>&1
grep -E "^== |progression|dcgan_quality|rror" "$OUT/study.log"
env -u LD_LIBRARY_PATH "$PY" - "$OUT/dcgan_caltech101-6.csv" "$OUT/torch_dcgan_caltech101-6.csv" <<'PYEOF'
import csv, os, sys
for f in sys.argv[1:]:
    if os.path.exists(f):
        rows = list(csv.DictReader(open(f)))
        if rows:
            secs = sum(float(r["seconds"]) for r in rows)
            print(f"  {rows[0]['app']:5s}: {len(rows)} epochs in {secs:.1f} s of training "
                  f"({secs / len(rows):.3f} s per epoch; the PyCUDA study: 9.11 s)")
PYEOF

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
env -u LD_LIBRARY_PATH "$PY" scripts/plot.py --results "$OUT" --out "$OUT/plots" | grep -c wrote
stage "done: $OUT"
