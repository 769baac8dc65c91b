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
#   accuracy  30 epochs x seeds 1 2 3 of pdnn on the GPU (fp32, CUDA graph) and of PyTorch on
#             the GPU (scripts/twins/torch_reference.py caltech: same initial weights, photos,
#             split, data order, augmentation draws and dropout masks), one after the other so
#             that each epoch's seconds are its own -> $RESULTS/accuracy/
#             {pdnn,torch}-cuda_caltech9_s<seed>.csv, logs in $RESULTS; then the summary
#             (scripts/report/accuracy_summary.py: final accuracy, mean and std over seeds, pdnn -
#             PyTorch), each framework's seconds per epoch, and the plots (scripts/report/plot.py).
# Knobs: PYTHON (python3 with torch 2.x, numpy and PIL or cv2), SEEDS ("1 2 3"), EPOCHS (30),
# STEPS (300), DATA (datasets/caltech101-6), CONV_ALGO (the --conv-algo of the pdnn accuracy runs;
# default the app's, auto), TORCH_ACC (1; 0 skips the PyTorch accuracy runs), PDNN_ACC (1; 0
# skips pdnn's: PyTorch's twin draws pdnn's initial weights itself, so seeds that a visit cut
# short can be finished alone).
set -uo pipefail
source "$(dirname "$0")/../host.sh"
SEEDS=${SEEDS:-1 2 3}
EPOCHS=${EPOCHS:-30}
STEPS=${STEPS:-300}
DATA=${DATA:-datasets/caltech101-6}
LOG=$RESULTS
ACC=$RESULTS/accuracy
PARTS=${PARTS:-check bench accuracy}
for part in $PARTS; do
  case $part in check|bench|accuracy) ;; *) echo "caltech: unknown part $part (check, bench, accuracy)" >&2; exit 2 ;; esac
done
has() { [[ " $PARTS " == *" $1 "* ]]; }
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
  # pdnn: ~1 s per epoch (20 steps + the 1,299 test photos) -> ~35 s per seed; PyTorch:
  # ~1.5 s per epoch, plus ~10 s to regenerate pdnn's 105 M initial weights in numpy.
  echo "== $(elapsed) accuracy: $EPOCHS epochs x seeds $SEEDS, pdnn then PyTorch (about 5 minutes)"
  for s in $([ "${PDNN_ACC:-1}" = 1 ] && echo $SEEDS); do
    rm -f "$ACC/pdnn-cuda_caltech9_s$s.csv" "$ACC/torch-cuda_caltech9_s$s.csv"
    "$BIN/caltech101" --device cuda --data "$DATA" --epochs "$EPOCHS" --seed "$s" \
      ${CONV_ALGO:+--conv-algo "$CONV_ALGO"} \
      --out "$ACC/pdnn-cuda_caltech9_s$s.csv" --confusion "$ACC/pdnn-cuda_confusion_s$s.png" \
      > "$LOG/caltech_pdnn_s$s.log" 2>&1 || echo "caltech: pdnn seed $s failed (see $LOG/caltech_pdnn_s$s.log)"
    grep -E "^epoch $EPOCHS/" "$LOG/caltech_pdnn_s$s.log" | grep -v batch | cut -c1-160
    echo "   $(elapsed) pdnn seed $s done"
  done
  for s in $([ "${TORCH_ACC:-1}" = 1 ] && echo $SEEDS); do
    py scripts/twins/torch_reference.py caltech --device cuda --data "$DATA" --epochs "$EPOCHS" \
      --seed "$s" --threads 8 --out "$ACC/torch-cuda_caltech9_s$s.csv" \
      > "$LOG/caltech_torch_s$s.log" 2>&1 || echo "caltech: PyTorch seed $s failed (see $LOG/caltech_torch_s$s.log)"
    grep -E "^epoch $EPOCHS/" "$LOG/caltech_torch_s$s.log" | cut -c1-160
    echo "   $(elapsed) PyTorch seed $s done"
  done
  py scripts/report/accuracy_summary.py "$ACC"
  py - "$ACC" <<'EOF'
import csv, glob, os, statistics, sys
per = {}
for p in sorted(glob.glob(os.path.join(sys.argv[1], "*-cuda_caltech9_s*.csv"))):
    rows = list(csv.DictReader(open(p)))
    if rows:
        per.setdefault(rows[0]["app"], []).extend(float(r["seconds"]) for r in rows)
for app, secs in per.items():
    print(f"{app}: {statistics.median(secs):.2f} s per epoch (median over {len(secs)} epochs; "
          f"the paper's Cython CNN: 991 s on 6 cores)")
EOF
  py scripts/report/plot.py --results "$RESULTS" --out "$RESULTS/plots"
fi
echo "== $(elapsed) done; logs in $LOG"
