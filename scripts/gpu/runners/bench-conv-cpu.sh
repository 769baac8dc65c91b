#!/usr/bin/env bash
# bench-conv-cpu: bench_conv (the 3x3 convolutions of W2-W4 per pass, im2col vs Winograd vs
# direct, with the sgemm rate of the same run) on the host's CPU cores at THREADS
# (1,2,8,16), once with OpenBLAS's core from the bundle's env.sh and once with Haswell (AVX2)
# kernels, -> $RESULTS/conv_gpuhost.csv. W4 runs at BATCH (64, the workload's). About 10
# minutes at the defaults. Prepare: BINS=bench_conv DATA= scripts/gpu/prepare.sh
set -euo pipefail
source "$(dirname "$0")/../host.sh"
need_bin bench_conv
args=(--threads "${THREADS:-1,2,8,16}" --out "$RESULTS/conv_gpuhost.csv" --repeats "${REPEATS:-7}")
"$BIN/bench_conv" "${args[@]}" --filter W3
"$BIN/bench_conv" "${args[@]}" --filter W4 --batch "${BATCH:-64}"
# The wrapper's env.sh names a core only when none is set: this run asks for AVX2's.
OPENBLAS_CORETYPE=Haswell "$BIN/bench_conv" "${args[@]}" --filter W3
