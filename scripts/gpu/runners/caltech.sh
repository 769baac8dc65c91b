#!/usr/bin/env bash
# caltech: the W4 (Caltech101, 9-layer CNN) visit to a lent GPU host.
# Prepare (the photos travel with the working tree; no IDX data is needed):
#   DATA= BINS="caltech101 pdnn_tests" scripts/gpu/prepare.sh
# PARTS ("check bench accuracy" by default; about 7 minutes on an H100, estimates printed as it goes):
#   check     the CPU-vs-CUDA parity cases of W4's paths (pdnn_tests: the W4 training step
#             through the prefetching loader, the GPU runtime, the classifier task)
#   bench     W4 step times: pdnn fp32 and TF32, eager and CUDA graph, against PyTorch eager
#             with cuDNN in fp32 and TF32 (scripts/bench/bench_gpu.sh WORKLOADS=W4, 300 steps
#             each) -> $RESULTS/gpu.csv
#   accuracy  30 epochs x seeds 1 2 3 of pdnn on the GPU (--precision PRECISION, CUDA graph) and
#             of PyTorch on the GPU (scripts/twins/torch_reference.py caltech --precision
#             PRECISION: same initial weights, photos, split, data order, augmentation draws and
#             dropout masks; bf16 there is autocast + channels_last, what a PyTorch user runs),
#             one after the other so that each epoch's seconds are its own -> $RESULTS/accuracy/
#             {pdnn,torch}-cuda_caltech9_s<seed>.csv (fp32), {pdnn,torch}-cuda-<precision>_
#             caltech9_s<seed>.csv (others: both precisions can share a folder), logs in
#             $RESULTS; then the summary (scripts/report/accuracy_summary.py: final accuracy,
#             mean and std over seeds per framework and precision, pdnn - PyTorch, and for bf16
#             pdnn bf16 - pdnn fp32 and pdnn bf16 - PyTorch bf16 against issue 32's 1 point),
#             each one's seconds per epoch, and the plots (scripts/report/plot.py).
#             Measured (H100, fp32, 2026-11-27): about 65 s a pdnn seed (17 s of training, the
#             rest the test set each epoch and start-up) and 50 s a PyTorch seed.
# Knobs: PYTHON (python3 with torch 2.x, numpy and PIL or cv2), SEEDS ("1 2 3"), EPOCHS (30),
# STEPS (300), DATA (datasets/caltech101-6), CONV_ALGO (the --conv-algo of the pdnn accuracy runs;
# default the app's, auto), PRECISION (fp32; bf16 or tf32, or a list such as "fp32 bf16": each in
# turn, pdnn's then PyTorch's), TORCH_ACC (1; 0 skips the PyTorch accuracy runs), PDNN_ACC (1; 0
# skips pdnn's: PyTorch's twin draws pdnn's initial weights itself, so seeds that a visit cut
# short can be finished alone; each side deletes only its own CSVs first), SUMMARY_WITH (more
# folders of runs for the summary, e.g. results/caltech101/accuracy-own-kernels: fp32 runs
# committed in the tree, so a bf16 visit is compared with them in its own output).
# Issue 32's bf16 accuracy (prepare BINS="caltech101" DATA=; estimates for an H100):
#   PRECISION=bf16 PARTS=accuracy SUMMARY_WITH=results/caltech101/accuracy-own-kernels \
#     scripts/gpu/visit.sh caltech                                      about 6 minutes
#     (PDNN_ACC=0 or TORCH_ACC=0: one side, about 3.5 or 2.5 minutes)
#   PRECISION="fp32 bf16" PARTS=accuracy TORCH_ACC=0 ...                pdnn's both, about 7
# pdnn fp32 at this revision is the better baseline; the last fp32 runs are in
# results/caltech101/accuracy-own-kernels/ (48105d5, --conv-algo own; its PyTorch runs predate
# the twin's --precision: PyTorch's default, cuDNN convolutions in TF32). Summarise a bf16
# visit beside them here with
#   scripts/report/accuracy_summary.py <visit>/caltech/accuracy results/caltech101/accuracy-own-kernels
# (the summary goes into the first folder; a run in both folders is refused).
set -uo pipefail
source "$(dirname "$0")/../host.sh"
SEEDS=${SEEDS:-1 2 3}
PRECISION=${PRECISION:-fp32}
EPOCHS=${EPOCHS:-30}
STEPS=${STEPS:-300}
DATA=${DATA:-datasets/caltech101-6}
LOG=$RESULTS
ACC=$RESULTS/accuracy
PARTS=${PARTS:-check bench accuracy}
for part in $PARTS; do
  case $part in check|bench|accuracy) ;; *) echo "caltech: unknown part $part (check, bench, accuracy)" >&2; exit 2 ;; esac
done
for prec in $PRECISION; do
  case $prec in fp32|tf32|bf16) ;; *) echo "caltech: PRECISION: unknown precision $prec (fp32, tf32, bf16)" >&2; exit 2 ;; esac
done
has() { [[ " $PARTS " == *" $1 "* ]]; }
# The file-name tag of a precision: none for fp32 (the older runs' names), -<precision> else.
tag() { [ "$1" = fp32 ] || echo "-$1"; }
need_bin caltech101 || exit 1
[ -d "$DATA" ] || { echo "caltech: no $DATA" >&2; exit 1; }
mkdir -p "$ACC"
elapsed() { echo "[$RUNNER $(( $(date +%s) - _t0 )) s]"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
py -c 'import torch, numpy; print("torch", torch.__version__, "cuda", torch.version.cuda)' ||
  echo "caltech: no torch for $PYTHON: PyTorch parts will fail" >&2
decoder=$(py -c 'import cv2; print("cv2", cv2.__version__)' 2>/dev/null ||
          py -c 'import PIL; print("PIL", PIL.__version__)' 2>/dev/null || echo none)
echo "caltech: photo decoder for PyTorch: $decoder"

if has check; then
  echo "== $(elapsed) parity: W4 training step via the prefetching loader, GPU runtime"
  if [ -x "$BIN/pdnn_tests" ]; then
    "$BIN/pdnn_tests" --gtest_filter='*caltech9*:*Adagrad*:*Dropout*:CudaRuntime.*:ClassifierTask.*' \
      2>&1 | tail -n 4
  else
    echo "caltech: no $BIN/pdnn_tests (add it to BINS): parity not checked"
  fi
fi

if has bench; then
  # pdnn: 4 runs of 300 steps (~25 ms each) plus decoding; PyTorch: 2 x 300 eager steps.
  echo "== $(elapsed) W4 step times on the GPU (about 1.5 minutes)"
  WORKLOADS=W4 PI=0 STEPS=$STEPS BIN=$BIN PYTHON=$PYTHON CALTECH_DATA=$DATA \
    OUT="$RESULTS/gpu.csv" scripts/bench/bench_gpu.sh 2>&1 | tee "$LOG/caltech_bench.log" | grep -v '^epoch'
fi

if has accuracy; then
  # Per seed (H100, fp32): pdnn ~65 s (30 x 0.55 s of training, the 1,299 test photos each
  # epoch, start-up); PyTorch ~50 s (30 x 0.6 s, ~20 s to regenerate pdnn's 105 M initial
  # weights in numpy and decode the photos).
  echo "== $(elapsed) accuracy: $EPOCHS epochs x seeds $SEEDS, precision $PRECISION, pdnn then" \
       "PyTorch (on an H100 about 65 s a pdnn seed, 50 s a PyTorch seed)"
  for prec in $PRECISION; do
    t=$(tag "$prec")
    for s in $([ "${PDNN_ACC:-1}" = 1 ] && echo $SEEDS); do
      rm -f "$ACC/pdnn-cuda${t}_caltech9_s$s.csv"
      "$BIN/caltech101" --device cuda --precision "$prec" --data "$DATA" --epochs "$EPOCHS" \
        --seed "$s" ${CONV_ALGO:+--conv-algo "$CONV_ALGO"} \
        --out "$ACC/pdnn-cuda${t}_caltech9_s$s.csv" --confusion "$ACC/pdnn-cuda${t}_confusion_s$s.png" \
        > "$LOG/caltech_pdnn${t}_s$s.log" 2>&1 ||
        echo "caltech: pdnn $prec seed $s failed (see $LOG/caltech_pdnn${t}_s$s.log)"
      grep -E "^epoch $EPOCHS/" "$LOG/caltech_pdnn${t}_s$s.log" | grep -v batch | cut -c1-160
      echo "   $(elapsed) pdnn $prec seed $s done"
    done
    for s in $([ "${TORCH_ACC:-1}" = 1 ] && echo $SEEDS); do
      rm -f "$ACC/torch-cuda${t}_caltech9_s$s.csv"
      py scripts/twins/torch_reference.py caltech --device cuda --precision "$prec" --data "$DATA" \
        --epochs "$EPOCHS" --seed "$s" --threads 8 --out "$ACC/torch-cuda${t}_caltech9_s$s.csv" \
        > "$LOG/caltech_torch${t}_s$s.log" 2>&1 ||
        echo "caltech: PyTorch $prec seed $s failed (see $LOG/caltech_torch${t}_s$s.log)"
      grep -E "^epoch $EPOCHS/" "$LOG/caltech_torch${t}_s$s.log" | cut -c1-160
      echo "   $(elapsed) PyTorch $prec seed $s done"
    done
  done
  # shellcheck disable=SC2086  # SUMMARY_WITH is a list of folders
  py scripts/report/accuracy_summary.py "$ACC" ${SUMMARY_WITH:-}
  echo "(the paper's Cython CNN: 991 s per epoch on 6 cores)"
  py scripts/report/plot.py --results "$RESULTS" --out "$RESULTS/plots"
fi
echo "== $(elapsed) done; logs in $LOG"
