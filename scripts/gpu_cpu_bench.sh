#!/usr/bin/env bash
# Runs on a lent GPU host after scripts/gpu_prepare.sh here (BINS with mnist pi bench_conv, and
# caltech101 for W4; DATA with mnist-npm10k, and caltech101-6 for W4): the CPU speed
# benchmarks on the host's own cores, beside the host's PyTorch (2.11) in the same run:
#   $OUT/mnist_gpuhost.csv     scripts/bench_mnist.sh   W2 b8, W2 b128, W3 at THREADS
#   $OUT/scaling_gpuhost.csv   scripts/scaling.sh       pi and the MNIST steps at SCALING_THREADS
#   $OUT/caltech_gpuhost.csv   scripts/bench_caltech.sh W4 at W4_THREADS (when caltech101 is
#                              bundled; W4=0 skips it)
# Threads are pinned one per physical core (OMP_PLACES=cores), so 2 threads are 2 cores.
# OpenBLAS gets the core gpu-bundle/env.sh names. Only pdnn's binaries get the bundle's
# libraries (wrappers), so python3 keeps its own.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-results/gpu-run}"; mkdir -p "$OUT"
wrap=$(mktemp -d)
scripts/gpu_wrap.sh "$wrap"
# The apps and scripts look for the data under datasets/: point there at the bundle's copies.
mkdir -p datasets
for d in gpu-bundle/data/*; do
  [ -e "datasets/$(basename "$d")" ] || ln -s "$PWD/$d" "datasets/$(basename "$d")"
done
echo "gpu_cpu_bench: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')," \
     "PyTorch $(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)"
BIN=$wrap THREADS=${THREADS:-1,2,8,16} SCALE=${SCALE:-2} PYTHON=python3 \
  OUT="$OUT/mnist_gpuhost.csv" scripts/bench_mnist.sh
BIN=$wrap THREADS=${SCALING_THREADS:-1,2,4,8,16} PYTHON=python3 \
  OUT="$OUT/scaling_gpuhost.csv" scripts/scaling.sh
if [ "${W4:-1}" = 1 ] && [ -x gpu-bundle/bin/caltech101 ] && [ -x scripts/bench_caltech.sh ]; then
  BIN=$wrap THREADS=${W4_THREADS:-1,2,16} ROUNDS=${ROUNDS:-2} PYTHON=python3 \
    OUT="$OUT/caltech_gpuhost.csv" LAYERS_OUT="$OUT/caltech_layers_gpuhost.csv" \
    scripts/bench_caltech.sh
fi
