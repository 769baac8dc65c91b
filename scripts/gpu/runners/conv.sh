#!/usr/bin/env bash
# conv: pdnn's GPU convolutions layer by layer (build/bin/bench_conv_gpu: every convolution of
# W3, W4 and W5, each pass and algorithm, fp32 and TF32, beside the device's sgemm and copy
# ceilings) -> $RESULTS/conv_gpu.csv. Prepare: BINS="bench_conv_gpu" DATA= scripts/gpu/prepare.sh
# Knobs: ALGOS (im2col,implicit,cudnn), PRECISIONS (fp32,tf32), REPEAT (20), FILTER (all of W3-W5;
# UNet: every convolution of the U-Net at 512 x 512, batch 4, for the per-pass comparison with
# torch-conv; add direct to ALGOS there: the step runs it).
set -uo pipefail
source "$(dirname "$0")/../host.sh"
need_bin bench_conv_gpu || exit 1
echo "cuDNN for pdnn: ${PDNN_CUDNN_LIBRARY:-not found (the cudnn algorithm is skipped or fails)}"
args=(--out "$RESULTS/conv_gpu.csv" --algos "${ALGOS:-im2col,implicit,cudnn}"
      --precisions "${PRECISIONS:-fp32,tf32}" --repeat "${REPEAT:-20}")
[ -n "${FILTER:-}" ] && args+=(--filter "$FILTER")
"$BIN/bench_conv_gpu" "${args[@]}"
