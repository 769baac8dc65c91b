#!/usr/bin/env bash
# W6 Hebbian reservoir on a lent GPU host (../shared/gpu/README.md), in two halves:
#   here:        scripts/gpu_hebbian.sh prepare   builds with CUDA for Hopper (sm_90, x86-64-v4
#                                                 CPU code) and bundles hebbian + pdnn_tests with
#                                                 their libraries into gpu-bundle-hebbian/ (git-
#                                                 ignored: carry it to the host)
#   on the host: scripts/gpu_hebbian.sh run [PART...]   PARTs (default all, in this order):
#                  tests   the CUDA twins against the CPU and the naive reference (~1 min)
#                  grid    the GPU grid, W on chip (where it fits) and streamed (~1 min)
#                  target  fp32 n = 2000 (<= 15 us a step?), on chip and streamed alternately
#                  drift   how far the GPU drifts from the CPU as T grows
#                  cpu     the host's CPU at 1..16 threads
#                  torch   PyTorch eager on the GPU, CuPy style (<= 6 min)
#                  numpy   numpy on the host CPU (<= 8 min)
#                all into $OUT (default results/gpu-run/hebbian); each PART fits in a 10-minute
#                command.
# Only the bundled binaries see the bundle's LD_LIBRARY_PATH (a subshell each): the host's
# python3 keeps its own libraries (trap 3 of the README).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-gpu-bundle-hebbian}  # B=gpu-bundle: the bundle of scripts/gpu_prepare.sh (with hebbian and pdnn_tests in BINS)

case "${1:-}" in
prepare)
  cmake -S . -B build-gpu-cuda -DCMAKE_BUILD_TYPE=Release -DPDNN_ARCH=x86-64-v4 -DPDNN_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
  cmake --build build-gpu-cuda -j "$(nproc)" --target hebbian pdnn_tests
  scripts/gpu_bundle.sh "$B" build-gpu-cuda/bin/hebbian build-gpu-cuda/bin/pdnn_tests
  ;;
run)
  OUT="${OUT:-results/gpu-run/hebbian}"
  mkdir -p "$OUT"
  [ -x "$B/bin/hebbian" ] || { echo "gpu_hebbian: no $B/bin/hebbian: run '$0 prepare' first and carry $B" >&2; exit 1; }
  pdnn() { ( source "$B/env.sh" && "$B/bin/$1" "${@:2}" ); }
  nvidia-smi -L > "$OUT/gpu.txt" 2>&1 || true
  grid="--n 200,1000,2000 --t 500,5000,44100 --dtype float32,float64"
  parts=("${@:2}")
  [ ${#parts[@]} -gt 0 ] || parts=(tests grid target drift cpu torch numpy)
  for part in "${parts[@]}"; do
    echo "== gpu_hebbian: $part"
    case "$part" in
    tests)
      pdnn pdnn_tests --gtest_filter='HebbianCuda*:HebbianCpu*:SimdTanh*' 2>&1 | tee "$OUT/tests.log" ;;
    grid)
      for leak in 0 0.5; do
        pdnn hebbian --device cuda $grid --leak $leak --out "$OUT/hebbian.csv"
        pdnn hebbian --device cuda $grid --leak $leak --w-streamed --out "$OUT/hebbian.csv"
      done 2>&1 | tee "$OUT/grid.log" ;;
    target)
      for r in 1 2 3 4 5; do
        pdnn hebbian --device cuda --n 2000 --t 5000 --leak 0.5 --repeat 3 --out "$OUT/target.csv"
        pdnn hebbian --device cuda --n 2000 --t 5000 --leak 0.5 --repeat 3 --w-streamed --out "$OUT/target.csv"
      done 2>&1 | tee "$OUT/target.log" ;;
    drift)
      for leak in 0 0.5; do
        pdnn hebbian --drift --device cuda --n 200,2000 --t 10,100,1000 --dtype float32,float64 \
          --leak $leak --threads 16 --out "$OUT/drift.csv"
      done 2>&1 | tee "$OUT/drift.log" ;;
    cpu)
      ( export OMP_PROC_BIND=close OMP_PLACES=cores
        pdnn hebbian --n 200,1000,2000 --t 500,5000 --dtype float32,float64 --threads 1,2,4,8,16 \
          --leak 0.5 --out "$OUT/hebbian.csv" ) 2>&1 | tee "$OUT/cpu.log" ;;
    torch)
      python3 scripts/hebbian_numpy.py --framework torch --device cuda $grid --leak 0.5 --max-seconds 20 \
        --out "$OUT/hebbian.csv" 2>&1 | tee "$OUT/torch.log" ;;
    numpy)
      python3 scripts/hebbian_numpy.py --n 200,1000,2000 --t 500,5000 --dtype float32,float64 \
        --threads 1,16 --leak 0.5 --max-seconds 20 --out "$OUT/hebbian.csv" 2>&1 | tee "$OUT/numpy.log" ;;
    *)
      echo "gpu_hebbian: unknown part $part" >&2; exit 2 ;;
    esac
  done
  echo "gpu_hebbian: results in $OUT"
  ;;
*)
  echo "usage: $0 prepare|run   (prepare here, run on the GPU host; see the header)" >&2
  exit 2
  ;;
esac
