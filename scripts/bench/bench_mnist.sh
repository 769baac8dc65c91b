#!/usr/bin/env bash
# Step times (forward + backward + update of one batch) of W2 b8, W2 b128 and W3 b128 at 1 and
# 2 threads (THREADS="1,2" by default), for pdnn and, when Debian's torch is importable,
# PyTorch 1.13 in the same run, in two configurations:
#   default  as installed, no settings;
#   best     the settings that helped it most on this machine (SPEC.md, "lessons"): malloc
#            takes transparent huge pages and keeps freed buffers instead of unmapping them
#            (GLIBC_TUNABLES, so activations do not page-fault anew each step), OpenMP workers
#            sleep instead of spinning (OMP_WAIT_POLICY=passive) and OpenBLAS runs one thread
#            so it does not fight OpenMP's pool (OPENBLAS_NUM_THREADS=1).
# Each point is one process running STEPS steps (the first 2 left out); median/min/max are
# over those steps. Rows are appended to runs/bench/mnist.csv (OUT=...), with the ratio
# torch median / pdnn median (> 1: pdnn faster). Both read the same data (datasets/get_mnist.sh).
# Timings on a shared machine are noisy: run it on an idle one and repeat before quoting.
# Environment: BIN, PYTHON, OUT, THREADS, SCALE (step-count multiplier), TORCH=0 (pdnn alone).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-build/bin}
PY=${PYTHON:-/usr/bin/python3}
source scripts/bench/blas_env.sh  # PyTorch gets the OpenBLAS kernels pdnn runs
OUT=${OUT:-runs/bench/mnist.csv}
THREADS=${THREADS:-1,2}
SCALE=${SCALE:-1}   # multiplies the step counts (more steps, steadier medians)
PIN=(OMP_PROC_BIND=close OMP_PLACES=cores)
BEST=(GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967296
      OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=1)

TORCH=${TORCH:-1}   # 0: time pdnn alone
[ -x "$BIN/mnist" ] || { echo "bench_mnist: $BIN/mnist not built (make build)" >&2; exit 1; }
have_torch=0
if [ "$TORCH" = 0 ]; then echo "bench_mnist: TORCH=0: pdnn only"
elif "$PY" -c 'import torch' 2>/dev/null; then have_torch=1
else echo "bench_mnist: no torch for $PY (scripts/tools/install_deps.sh torch): pdnn only" >&2; fi

rev=$(git describe --always --dirty --abbrev=10 2>/dev/null || echo unknown)
host=$(hostname)
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //; s/,/ /g')
header="app,config,model,batch,threads,steps,median_ms,min_ms,max_ms,torch_over_pdnn,blas_core,dataset,git_rev,host,cpu_model,timestamp"
rows=()

# Runs one point; prints "median min max steps" parsed from the step_ms line.
measure() {
  local line
  line=$("$@" | grep '^step_ms ') || { echo "bench_mnist: failed: $*" >&2; return 1; }
  echo "$line" | sed -E 's/.*steps=([0-9]+) median=([0-9.]+) min=([0-9.]+) max=([0-9.]+).*/\2 \3 \4 \1/'
}

# The data set and the OpenBLAS kernel set in use (OPENBLAS_CORETYPE, or OpenBLAS's own
# detection: it sets the sgemm speed of pdnn and of PyTorch's dense layers alike), from the
# header line the app prints.
hdr=$("$BIN/mnist" --epochs 1 --steps 1 --threads 1 | head -1)
dataset=$(echo "$hdr" | sed -nE 's/.*dataset ([^ ]+) .*/\1/p')
blas_core=$(echo "$hdr" | sed -nE 's/.*[|] BLAS ([A-Za-z0-9_]+).*/\1/p')
echo "bench_mnist: dataset $dataset, OpenBLAS core $blas_core (OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset})"
printf "%-6s %-8s %-6s %5s %7s %10s %10s %10s %8s\n" app config model batch threads median_ms \
       min_ms max_ms t/pdnn
for spec in small:8:300 small:128:60 keras:128:12; do
  IFS=: read -r model batch steps <<< "$spec"
  steps=$((steps * SCALE))
  for t in ${THREADS//,/ }; do
    read -r med mn mx n < <(measure env "${PIN[@]}" "$BIN/mnist" --model "$model" \
        --batch "$batch" --threads "$t" --steps "$steps")
    printf "%-6s %-8s %-6s %5s %7s %10s %10s %10s %8s\n" pdnn - "$model" "$batch" "$t" "$med" \
           "$mn" "$mx" -
    rows+=("pdnn,-,$model,$batch,$t,$n,$med,$mn,$mx,,$blas_core,$dataset,$rev,$host,$cpu,$(date -u +%FT%TZ)")
    pdnn_med=$med
    [ $have_torch = 1 ] || continue
    for config in default best; do
      envs=()
      [ $config = best ] && envs=("${BEST[@]}")
      read -r tmed tmn tmx tn < <(measure env "${envs[@]}" "$PY" scripts/twins/torch_reference.py \
          mnist --model "$model" --batch "$batch" --threads "$t" --steps "$steps")
      ratio=$(awk -v a="$tmed" -v b="$pdnn_med" 'BEGIN { printf "%.3f", a / b }')
      printf "%-6s %-8s %-6s %5s %7s %10s %10s %10s %8s\n" torch "$config" "$model" "$batch" \
             "$t" "$tmed" "$tmn" "$tmx" "$ratio"
      rows+=("torch,$config,$model,$batch,$t,$tn,$tmed,$tmn,$tmx,$ratio,$blas_core,$dataset,$rev,$host,$cpu,$(date -u +%FT%TZ)")
    done
  done
done

printf "%s\n" "${rows[@]}" | "$PY" scripts/pylib/results_csv.py append "$OUT" "$header"
echo "bench_mnist: ${#rows[@]} rows appended to $OUT"
