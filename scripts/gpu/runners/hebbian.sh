#!/usr/bin/env bash
# hebbian: W6, the Hebbian reservoir, on a lent GPU host. Prepare:
#   BINS="hebbian pdnn_tests" DATA= scripts/gpu/prepare.sh
# PARTS (default all, in this order), each into $RESULTS and each inside a 10-minute command:
#   tests   the CUDA twins against the CPU and the naive reference (~1 min)
#   grid    the GPU grid, W on chip (where it fits) and streamed (~1 min)
#   target  fp32 n = 2000 (<= 15 us a step?), on chip and streamed alternately
#   drift   how far the GPU drifts from the CPU as T grows
#   cpu     the host's CPU at 1..16 threads
#   torch   PyTorch eager on the GPU, CuPy style (<= 6 min)
#   numpy   numpy on the host CPU (<= 8 min)
# e.g. PARTS="tests grid target" scripts/gpu/visit.sh hebbian
set -euo pipefail
source "$(dirname "$0")/../host.sh"
need_bin hebbian pdnn_tests || exit 1
pdnn() { "$BIN/$1" "${@:2}"; }
nvidia-smi -L > "$RESULTS/gpu.txt" 2>&1 || true
grid="--n 200,1000,2000 --t 500,5000,44100 --dtype float32,float64"
read -r -a parts <<< "${PARTS:-tests grid target drift cpu torch numpy}"
for part in "${parts[@]}"; do
  stage "$part"
  case "$part" in
  tests)
    pdnn pdnn_tests --gtest_filter='HebbianCuda*:HebbianCpu*:SimdTanh*' 2>&1 | tee "$RESULTS/tests.log" ;;
  grid)
    for leak in 0 0.5; do
      pdnn hebbian --device cuda $grid --leak $leak --out "$RESULTS/hebbian.csv"
      pdnn hebbian --device cuda $grid --leak $leak --w-streamed --out "$RESULTS/hebbian.csv"
    done 2>&1 | tee "$RESULTS/grid.log" ;;
  target)
    for r in 1 2 3 4 5; do
      pdnn hebbian --device cuda --n 2000 --t 5000 --leak 0.5 --repeat 3 --out "$RESULTS/target.csv"
      pdnn hebbian --device cuda --n 2000 --t 5000 --leak 0.5 --repeat 3 --w-streamed --out "$RESULTS/target.csv"
    done 2>&1 | tee "$RESULTS/target.log" ;;
  drift)
    for leak in 0 0.5; do
      pdnn hebbian --drift --device cuda --n 200,2000 --t 10,100,1000 --dtype float32,float64 \
        --leak $leak --threads 16 --out "$RESULTS/drift.csv"
    done 2>&1 | tee "$RESULTS/drift.log" ;;
  cpu)
    ( export OMP_PROC_BIND=close OMP_PLACES=cores
      pdnn hebbian --n 200,1000,2000 --t 500,5000 --dtype float32,float64 --threads 1,2,4,8,16 \
        --leak 0.5 --out "$RESULTS/hebbian.csv" ) 2>&1 | tee "$RESULTS/cpu.log" ;;
  torch)
    py scripts/twins/hebbian_numpy.py --framework torch --device cuda $grid --leak 0.5 --max-seconds 20 \
      --out "$RESULTS/hebbian.csv" 2>&1 | tee "$RESULTS/torch.log" ;;
  numpy)
    py scripts/twins/hebbian_numpy.py --n 200,1000,2000 --t 500,5000 --dtype float32,float64 \
      --threads 1,16 --leak 0.5 --max-seconds 20 --out "$RESULTS/hebbian.csv" 2>&1 | tee "$RESULTS/numpy.log" ;;
  *)
    echo "hebbian: unknown part $part" >&2; exit 2 ;;
  esac
done
echo "hebbian: results in $RESULTS"
