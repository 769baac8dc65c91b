#!/usr/bin/env bash
# cpu-bench: the CPU speed benchmarks on the GPU host's own cores, beside the host's PyTorch in
# the same run. PARTS (default "mnist scaling caltech"):
#   mnist    $RESULTS/mnist_gpuhost.csv    scripts/bench/bench_mnist.sh   W2 b8, W2 b128, W3 at THREADS
#                                           (1,2,8,16)
#   scaling  $RESULTS/scaling_gpuhost.csv  scripts/bench/scaling.sh       pi and the MNIST steps at
#                                           SCALING_THREADS (1,2,4,8,16; results/README.md's
#                                           gpuhost sweep used 1,2,4,8,12,16)
#   caltech  $RESULTS/caltech_gpuhost.csv  scripts/bench/bench_caltech.sh W4 at W4_THREADS (1,2,16),
#                                           when caltech101 is bundled
#   dcgan    $RESULTS/dcgan_gpuhost.csv    scripts/bench/bench_dcgan.sh   W5 step, pdnn and PyTorch
#            $RESULTS/dcgan_layers_gpuhost.csv                      interleaved at W5_THREADS
#                                           (1,2,8), then both per-layer profiles (pdnn's
#                                           dcgan_profile_t<T>.csv, PyTorch's
#                                           dcgan_torch_layers.csv); about 4 minutes
#   w5conv   $RESULTS/w5conv_gpuhost.csv   build/bin/bench_conv: W5's stride-2 convolutions per
#                                           pass and algorithm at W5_THREADS (not in the default
#                                           PARTS; about 2 minutes)
# The scripts pin one thread per physical core (OMP_PLACES=cores), so 2 threads are 2 cores; OpenBLAS
# gets the core the bundle's env.sh names.
# Prepare: BINS="mnist pi bench_conv caltech101 dcgan" DATA=mnist-npm10k scripts/gpu/prepare.sh
# (W5 alone: BINS="dcgan bench_conv" DATA=mnist-npm10k, then PARTS=dcgan).
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
        OUT="$RESULTS/mnist_gpuhost.csv" scripts/bench/bench_mnist.sh ;;
    scaling)
      need_bin mnist pi
      BIN=$BIN THREADS=${SCALING_THREADS:-1,2,4,8,16} PYTHON=$PYTHON \
        MNIST_ARGS="--data $BUNDLE/data/mnist-npm10k" OUT="$RESULTS/scaling_gpuhost.csv" \
        scripts/bench/scaling.sh ;;
    caltech)
      if [ -x "$BIN/caltech101" ]; then
        BIN=$BIN THREADS=${W4_THREADS:-1,2,16} ROUNDS=${ROUNDS:-2} PYTHON=$PYTHON \
          OUT="$RESULTS/caltech_gpuhost.csv" LAYERS_OUT="$RESULTS/caltech_layers_gpuhost.csv" \
          scripts/bench/bench_caltech.sh
      else
        echo "cpu-bench: no caltech101 in $BIN: W4 skipped"
      fi ;;
    dcgan)
      need_bin dcgan bench_conv
      BIN=$BIN THREADS=${W5_THREADS:-1,2,8} STEPS=${W5_STEPS:-6} REPEAT=${W5_REPEAT:-2} \
        PROFILE_STEPS=${W5_PROFILE_STEPS:-5} PYTHON=$PYTHON DATA=$BUNDLE/data/mnist-npm10k \
        OUT="$RESULTS/dcgan_gpuhost.csv" LAYERS_OUT="$RESULTS/dcgan_layers_gpuhost.csv" \
        scripts/bench/bench_dcgan.sh ;;
    w5conv)
      need_bin bench_conv
      env OMP_PROC_BIND=close OMP_PLACES=cores "$BIN/bench_conv" --mode passes --filter W5 \
        --algos per-image,batched,winograd --threads "${W5_THREADS:-1,2,8}" --repeats 5 \
        --warmup 1 --out "$RESULTS/w5conv_gpuhost.csv" ;;
    *) echo "cpu-bench: unknown part $part (mnist, scaling, caltech, dcgan, w5conv)" >&2; exit 2 ;;
  esac
done
