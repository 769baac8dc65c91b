#!/usr/bin/env bash
# What overlapping the gradient all-reduce with backward hides on the CPU: W3 (mnist keras,
# global batch 128) as RANKS ranks x THREADS threads, --overlap on and off in alternating
# rounds (ROUNDS), each run's median step time and rank 0's all-reduce time per step with the
# part backward did not hide; rows to OUT (runs/scale/overlap_cpu.csv, scale_rows.py
# columns; mode dist = overlap on, dist-nooverlap = off), one pdnn single process with
# RANKS x THREADS threads first for reference.
#   scripts/bench/dist_overlap_cpu.sh            (BIN=build/bin RANKS=2 THREADS=1 STEPS=20 ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-build/bin}
RANKS=${RANKS:-2}
THREADS=${THREADS:-1}
STEPS=${STEPS:-20}
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-runs/scale/overlap_cpu.csv}
PYTHON=${PYTHON:-/usr/bin/python3}
DATA=${DATA:-}
for d in datasets/fashion-mnist datasets/mnist datasets/mnist-npm10k; do
  [ -z "$DATA" ] && [ -d "$d" ] && DATA=$d
done
[ -n "$DATA" ] || { echo "dist_overlap_cpu: no MNIST-layout data (datasets/get_fashion_mnist.sh)"; exit 1; }
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags=(--model keras --data "$DATA" --batch 128 --steps "$STEPS")
echo "dist_overlap_cpu: W3 on $DATA, $RANKS ranks x $THREADS threads, $ROUNDS rounds, machine load: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN/mnist" "${flags[@]}" --threads $((RANKS * THREADS)) --bench-csv "$tmp/b.csv" > "$tmp/log" 2>&1
grep step_ms "$tmp/log"
"$PYTHON" scripts/report/scale_rows.py "$tmp/b.csv" --workload W3 --ranks 1 --threads $((RANKS * THREADS)) \
  --global-batch 128 --mode single --out "$OUT"
for round in $(seq "$ROUNDS"); do
  for overlap in on off; do
    rm -f "$tmp/b.csv"
    mpirun "${root[@]}" --bind-to none -np "$RANKS" "$BIN/mnist" "${flags[@]}" --threads "$THREADS" \
      --distributed --overlap "$overlap" --bench-csv "$tmp/b.csv" > "$tmp/log" 2>&1 ||
      { tail -5 "$tmp/log"; exit 1; }
    mode=dist; [ "$overlap" = off ] && mode=dist-nooverlap
    echo "round $round, overlap $overlap:"
    "$PYTHON" scripts/report/scale_rows.py "$tmp/b.csv" --workload W3 --ranks "$RANKS" --threads "$THREADS" \
      --global-batch 128 --mode "$mode" --log "$tmp/log" --out "$OUT"
  done
done
