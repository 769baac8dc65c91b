#!/usr/bin/env bash
# dcgan: W5, the DCGAN, on a lent GPU host (well inside 10 minutes). Prepare:
#   BINS="dcgan gan_score mnist pdnn_tests" DATA="fashion-mnist" scripts/gpu/prepare.sh
#   1. the GPU tests of the DCGAN's kernels and steps (CPU-vs-CUDA parity, graph == eager);
#   2. the judging classifier (W3 on Fashion-MNIST, 3 epochs on the GPU);
#   3. pdnn's DCGAN on the GPU (fp32, CUDA graph), 5 epochs of 2,944 images, 10,000 samples,
#      and PyTorch's with the same recipe, initial weights, data order and noise;
#   4. the quality scores of both and of the held-out real images (build/bin/gan_score);
#   5. the iteration benchmark: pdnn fp32/TF32 x eager/graph (--steps) against PyTorch eager
#      and CUDA graph in the same run (scripts/twins/torch_gpu_bench.py --workloads W5), and the
#      epoch times of both 5-epoch runs (CSV "seconds": the paper's is 9.11 s on an RTX 6000).
# Everything goes to $RESULTS: logs, CSV files, sample grids, samples. Knobs: EPOCHS (5),
# STEPS (200), DATA ($BUNDLE/data/fashion-mnist).
set -uo pipefail
source "$(dirname "$0")/../host.sh"
OUT=$RESULTS
DATA=${DATA:-$BUNDLE/data/fashion-mnist}
EPOCHS=${EPOCHS:-5}
STEPS=${STEPS:-200}
need_bin dcgan gan_score mnist pdnn_tests || exit 1
[ -d "$DATA" ] || { echo "dcgan: no $DATA (scripts/gpu/prepare.sh with DATA=fashion-mnist)" >&2; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"

stage "1. GPU tests"
"$BIN/pdnn_tests" --gtest_filter='*Dcgan*:*normal_fill*:*prob_mean*:CudaRuntime.*:AllOps/Backends.*' \
  > "$OUT/tests.log" 2>&1
grep -E "^\[  (PASSED|FAILED)|SKIPPED \]|tests ran" "$OUT/tests.log" | tail -8

stage "2. classifier"
"$BIN/mnist" --device cuda --model keras --dataset fashion-mnist --data "$DATA" --epochs 3 \
  --threads 4 --out "$OUT/classifier.csv" --checkpoint "$OUT/classifier.ckpt" --overwrite > "$OUT/classifier.log" 2>  --threads 4 --out "$OUT/classifier.csv" --checkpoint "$OUT/classifier.ckpt" > "$OUT/classifier.log" 2>&11
tail -n 2 "$OUT/classifier.log"

stage "3a. pdnn DCGAN, $EPOCHS epochs (GPU, fp32, CUDA graph)"
"$BIN/dcgan" --device cuda --dataset fashion-mnist --data "$DATA" --epochs "$EPOCHS" --threads 4 \
  --out "$OUT/dcgan_fashion-mnist.csv" --iterations-out "$OUT/dcgan_fashion-mnist_iterations.csv" \
  --samples-dir "$OUT/samples/pdnn" --samples 10000 --samples-out "$OUT/samples_pdnn.idx.gz" \
  > "$OUT/dcgan_pdnn.log" 2>&1
grep -E "^epoch [0-9]+/[0-9]+  |WARNING|samples" "$OUT/dcgan_pdnn.log"

stage "3b. PyTorch DCGAN, $EPOCHS epochs (GPU, fp32)"
py scripts/twins/torch_reference.py dcgan --device cuda --dataset fashion-mnist \
  --data "$DATA" --epochs "$EPOCHS" --threads 4 --out "$OUT/torch_dcgan_fashion-mnist.csv" \
  --iterations-out "$OUT/torch_dcgan_fashion-mnist_iterations.csv" \
  --samples-dir "$OUT/samples/torch" --samples 10000 --samples-out "$OUT/samples_torch.idx.gz" \
  > "$OUT/dcgan_torch.log" 2>&1
grep -E "^epoch|samples|Error|error" "$OUT/dcgan_torch.log"

stage "4. quality"
"$BIN/gan_score" --device cuda --classifier "$OUT/classifier.ckpt" --dataset fashion-mnist \
  --data "$DATA" --set "pdnn=$OUT/samples_pdnn.idx.gz" --set "torch=$OUT/samples_torch.idx.gz" \
  --out "$OUT/quality.csv" 2>&1 | tee "$OUT/quality.log"

stage "5. iteration benchmark"
for graph in off on; do
  for tf in "" --tf32; do
    "$BIN/dcgan" --device cuda --dataset fashion-mnist --data "$DATA" --steps "$STEPS" --threads 4 \
      --cuda-graph "$graph" $tf --bench-csv "$OUT/bench_pdnn.csv" 2>&1 | grep '^step_ms'
  done
done
py scripts/twins/torch_gpu_bench.py --workloads W5 --steps "$STEPS" \
  --out "$OUT/bench_torch.csv" 2>&1 | grep -E "^torch|Error"
echo "epoch seconds (2,944 images; the paper: 9.11 s):"
py - "$OUT/dcgan_fashion-mnist.csv" "$OUT/torch_dcgan_fashion-mnist.csv" <<'PYEOF'
import csv, os, sys
for f in sys.argv[1:]:
    if os.path.exists(f):
        for r in csv.DictReader(open(f)):
            print(f"  {r['app']:5s} epoch {r['epoch']}: {float(r['seconds']):.3f} s, "
                  f"{1e3 * float(r['train_s_per_iter']):.2f} ms/iteration ({r['status']})")
PYEOF
py scripts/report/plot.py --results "$OUT" --out "$OUT/plots" | grep wrote
stage "done: $OUT"
