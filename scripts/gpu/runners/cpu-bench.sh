#!/usr/bin/env bash
# cpu-bench: the CPU speed benchmarks on the GPU host's own cores, beside the host's PyTorch in
# the same run. PARTS (default "mnist scaling caltech"):
#   mnist    $RESULTS/mnist_gpuhost.csv    scripts/bench_mnist.sh   W2 b8, W2 b128, W3 at THREADS
#                                           (1,2,8,16)
#   scaling  $RESULTS/scaling_gpuhost.csv  scripts/scaling.sh       pi and the MNIST steps at
#                                           SCALING_THREADS (1,2,4,8,16; results/README.md's
#                                           gpuhost sweep used 1,2,4,8,12,16)
#   caltech  $RESULTS/caltech_gpuhost.csv  scripts/bench_caltech.sh W4 at W4_THREADS (1,2,16),
#                                           when caltech101 is bundled
# The scripts pin one thread per physical core (OMP_PLACES=cores), so 2 threads are 2 cores; OpenBLAS
# gets the core the bundle's env.sh names.
# Prepare: BINS="mnist pi bench_conv caltech101" DATA=mnist-npm10k scripts/gpu/prepare.sh
set -euo pipefail
source "$(dirname "$0")/../host.sh"
link_datasets  # the benchmark scripts look for the data under datasets/
echo "cpu-bench: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')," \
     "PyTorch $(py -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)"
for part in ${PARTS:-mnist scaling caltech}; do
  stage "$part"
  case $part in
    mnist)
      need_bin mnist
      BIN=$BIN THREADS=${THREADS:-1,2,8,16} SCALE=${SCALE:-2} PYTHON=$PYTHON \
        OUT="$RESULTS/mnist_gpuhost.csv" scripts/bench_mnist.sh ;;
    scaling)
      need_bin mnist pi
      BIN=$BIN THREADS=${SCALING_THREADS:-1,2,4,8,16} PYTHON=$PYTHON \
        MNIST_ARGS="--data $BUNDLE/data/mnist-npm10k" OUT="$RESULTS/scaling_gpuhost.csv" \
        scripts/scaling.sh ;;
    caltech)
      if [ -x "$BIN/caltech101" ]; then
        BIN=$BIN THREADS=${W4_THREADS:-1,2,16} ROUNDS=${ROUNDS:-2} PYTHON=$PYTHON \
          OUT="$RESULTS/caltech_gpuhost.csv" LAYERS_OUT="$RESULTS/caltech_layers_gpuhost.csv" \
          scripts/bench_caltech.sh
      else
        echo "cpu-bench: no caltech101 in $BIN: W4 skipped"
      fi ;;
    *) echo "cpu-bench: unknown part $part (mnist, scaling, caltech)" >&2; exit 2 ;;
  esac
done
