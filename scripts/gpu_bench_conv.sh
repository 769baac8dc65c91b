#!/usr/bin/env bash
# Runs on a lent GPU host after scripts/gpu_prepare.sh here: bench_conv (the 3x3 convolutions of
# W2-W4 per pass, im2col vs Winograd vs direct, with the sgemm rate of the same run) on the
# host's CPU cores at THREADS (default 1,2,8,16), once with OpenBLAS's core from
# gpu-bundle/env.sh and once with Haswell (AVX2) kernels, into $OUT/conv_gpuhost.csv.
# W4 runs at BATCH (default 64, the workload's). About 10 minutes at the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-results/gpu-run}"; mkdir -p "$OUT"
source gpu-bundle/env.sh
args=(--threads "${THREADS:-1,2,8,16}" --out "$OUT/conv_gpuhost.csv" --repeats "${REPEATS:-7}")
gpu-bundle/bin/bench_conv "${args[@]}" --filter W3
gpu-bundle/bin/bench_conv "${args[@]}" --filter W4 --batch "${BATCH:-64}"
OPENBLAS_CORETYPE=Haswell gpu-bundle/bin/bench_conv "${args[@]}" --filter W3
