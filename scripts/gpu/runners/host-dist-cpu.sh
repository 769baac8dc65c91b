#!/usr/bin/env bash
# Data-parallel training on a GPU host's CPU (its 16 cores; no GPU used): the same cores split
# as ranks x threads per rank (SPLITS: 1x16 2x8 4x4 8x2 16x1), pdnn --distributed (mpirun)
# beside one pdnn process with all the threads ("single") and PyTorch DDP (gloo, started by
# torch.multiprocessing) with the same splits, for W3 (mnist keras, global batch 128) and W4
# (caltech101, global batch 64) when the bundle has the caltech101 app. Strong scaling: the
# global batch stays the user's, each rank takes rows r*B/N..(r+1)*B/N of it. Also MPI's own
# all-reduce bandwidth between 2..16 ranks (bench_allreduce). One command under 10 minutes;
# everything goes under $RESULTS:
#   $RESULTS/results/scale/cpu_dist.csv    one row per (app, workload, split), scale_rows.py columns
#   $RESULTS/results/scale/cpu_allreduce.csv
#   $RESULTS/plots/*.png                   scripts/report/plot.py over $RESULTS/results
#   $RESULTS/gpu_host_dist_cpu.log         everything printed
# Prepare: MPI=1 DATA=fashion-mnist BINS="mnist bench_allreduce caltech101" scripts/gpu/prepare.sh
#   (caltech101 for the W4 rows; W4's photos travel in datasets/)
# Knobs: SPLITS, STEPS_W3 (40), STEPS_W4 (6), BUDGET_S (540: later runs are skipped, with a
# line saying so, once the script has run this long), TORCH (1: also PyTorch DDP), PYTHON.
set -euo pipefail
source "$(dirname "$0")/../host.sh"
OUT=$RESULTS
SPLITS=${SPLITS:-1x16 2x8 4x4 8x2 16x1}
STEPS_W3=${STEPS_W3:-40}
STEPS_W4=${STEPS_W4:-6}
BUDGET_S=${BUDGET_S:-540}
TORCH=${TORCH:-1}
mkdir -p "$OUT/results/scale"
exec > >(tee -a "$OUT/gpu_host_dist_cpu.log") 2>&1
CSV=$OUT/results/scale/cpu_dist.csv
start=$SECONDS
W=$BIN
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -x "$W/mpirun" ] || { echo "host-dist-cpu: the bundle has no mpirun: run MPI=1 scripts/gpu/prepare.sh first"; exit 1; }
echo "host-dist-cpu: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)), splits: $SPLITS"
"$W/mpirun" --version | head -1
over() { [ $((SECONDS - start)) -ge "$BUDGET_S" ]; }
export OMP_PROC_BIND=close OMP_PLACES=threads

# W3's data: Fashion-MNIST (same shapes and cost as MNIST) from the bundle.
W3_DATA=""
for d in $BUNDLE/data/fashion-mnist $BUNDLE/data/mnist $BUNDLE/data/mnist-npm10k; do
  [ -d "$d" ] && { W3_DATA=$d; break; }
done

# run_pdnn NAME WORKLOAD APP GLOBAL_BATCH STEPS FLAGS...: the single process and every split.
run_pdnn() {
  local workload=$1 app=$2 batch=$3 steps=$4
  shift 4
  [ -x "$W/$app" ] || { echo "SKIP $workload: $app is not in the bundle"; return 0; }
  local cores; cores=$(nproc)
  over && { echo "SKIP $workload pdnn: over the time budget"; return 0; }
  echo "== pdnn $workload single process, $cores threads"
  rm -f "$tmp/b.csv"
  if "$W/$app" "$@" --batch "$batch" --steps "$steps" --threads "$cores" \
      --bench-csv "$tmp/b.csv" > "$tmp/log" 2>&1; then
    grep step_ms "$tmp/log"
    "$PYTHON" scripts/report/scale_rows.py "$tmp/b.csv" --workload "$workload" --ranks 1 \
      --threads "$cores" --global-batch "$batch" --mode single --out "$CSV"
  else
    tail -5 "$tmp/log"; echo "FAILED: pdnn $workload single"
  fi
  for s in $SPLITS; do
    local r=${s%x*} t=${s#*x}
    over && { echo "SKIP pdnn $workload $s: over the time budget"; continue; }
    [ "$r" -gt 1 ] || continue  # 1x16 is the single process above
    echo "== pdnn $workload $r ranks x $t threads (--distributed)"
    rm -f "$tmp/b.csv"
    # Each rank bound to its own t hardware threads; unbound if this topology refuses that.
    local mode=dist bind=(--use-hwthread-cpus --map-by "slot:PE=$t" --bind-to hwthread)
    if ! "$W/mpirun" -np "$r" "${bind[@]}" --report-bindings true > "$tmp/bind" 2>&1; then
      bind=(--bind-to none); mode=dist-unbound
      echo "(binding refused: $(tail -1 "$tmp/bind"); running unbound)"
    fi
    if "$W/mpirun" -np "$r" "${bind[@]}" "$W/$app" "$@" --batch "$batch" --steps "$steps" \
        --threads "$t" --distributed --bench-csv "$tmp/b.csv" > "$tmp/log" 2>&1; then
      grep -E "step_ms|all-reduce per step|distributed:" "$tmp/log"
      "$PYTHON" scripts/report/scale_rows.py "$tmp/b.csv" --workload "$workload" --ranks "$r" \
        --threads "$t" --global-batch "$batch" --mode "$mode" --log "$tmp/log" --out "$CSV"
    else
      tail -8 "$tmp/log"; echo "FAILED: pdnn $workload $s"
    fi
  done
}

run_torch() {
  local workload=$1 batch=$2 steps=$3
  [ "$TORCH" = 1 ] || return 0
  "$PYTHON" -c 'import torch, torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null ||
    { echo "SKIP PyTorch DDP: no torch with gloo for $PYTHON"; return 0; }
  for s in $SPLITS; do
    local r=${s%x*} t=${s#*x}
    over && { echo "SKIP torch $workload $s: over the time budget"; continue; }
    echo "== PyTorch DDP (gloo) $workload $r ranks x $t threads"
    "$PYTHON" scripts/twins/torch_ddp_bench.py --device cpu --workload "$workload" --ranks "$r" \
      --threads "$t" --global-batch "$batch" --steps "$steps" --out "$CSV" ||
      echo "FAILED: torch $workload $s"
  done
}

if [ -n "$W3_DATA" ]; then
  run_pdnn W3 mnist 128 "$STEPS_W3" --model keras --data "$W3_DATA"
else
  echo "SKIP W3: no MNIST-layout data in gpu-bundle/data (DATA=fashion-mnist scripts/gpu/prepare.sh)"
fi
run_torch W3 128 "$STEPS_W3"
run_pdnn W4 caltech101 64 "$STEPS_W4" ${CALTECH_ARGS:-}
[ -x "$W/caltech101" ] && run_torch W4 64 "$STEPS_W4"

# MPI's all-reduce between the ranks of this host, at W3's and W4's gradient sizes.
if [ -x "$W/bench_allreduce" ]; then
  for r in 2 4 8 16; do
    [ "$r" -le "$(nproc)" ] || break
    over && break
    "$W/mpirun" -np "$r" --bind-to none "$W/bench_allreduce" --device cpu \
      --sizes-mb 1,4.799528,64,408.028 --iters 5 --warmup 2 --label "cpu $(nproc) vCPU" \
      --out "$OUT/results/scale/cpu_allreduce.csv" | tail -5 || echo "FAILED: bench_allreduce $r"
  done
fi
"$PYTHON" scripts/report/plot.py --results "$OUT/results" --out "$OUT/plots" || echo "plot failed"
echo "host-dist-cpu: done in $((SECONDS - start)) s; rows in $CSV"
