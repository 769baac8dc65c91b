#!/usr/bin/env bash
# Thread sweeps: each workload at 1..nproc threads (or THREADS=1,2,4), threads pinned one per
# core (OMP_PROC_BIND=close OMP_PLACES=cores); appends workload, threads, median_ms, speedup
# (vs 1 thread of the same workload), efficiency (speedup / threads) to
# runs/scaling/scaling.csv (OUT). A workload whose app is not built is skipped with a message.
#
# Workloads and the command each runs at T threads (per-run CSVs go to a temp folder):
#   pi-omp, pi-omp-simd   pi --variants V --threads T --repeat PI_REPEAT --out TMP
#   mnist-small-b8        mnist --model small --batch 8   --steps STEPS_SMALL --threads T --out TMP --bench-csv TMP
#   mnist-small-b128      mnist --model small --batch 128 --steps STEPS_SMALL --threads T --out TMP --bench-csv TMP
#   mnist-keras-b128      mnist --model keras --batch 128 --steps STEPS_KERAS --threads T --out TMP --bench-csv TMP
# From each run's CSV the last row's median_ms column is taken (for mnist: median ms per
# training step). Extra mnist flags (e.g. the data folder) come from MNIST_ARGS.
#
# Environment: BIN (build/bin), THREADS (1..nproc), OUT (runs/scaling/scaling.csv),
# PI_REPEAT (5), STEPS_SMALL (200), STEPS_KERAS (20), MNIST_ARGS, PYTHON (/usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/../.."

BIN=${BIN:-build/bin}
THREADS=${THREADS:-$(seq -s, 1 "$(nproc)")}
OUT=${OUT:-runs/scaling/scaling.csv}
PI_REPEAT=${PI_REPEAT:-5}
STEPS_SMALL=${STEPS_SMALL:-200}
STEPS_KERAS=${STEPS_KERAS:-20}
MNIST_ARGS=${MNIST_ARGS:-}
PYTHON=${PYTHON:-/usr/bin/python3}
export OMP_PROC_BIND=close OMP_PLACES=cores

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
points="$tmp/points.csv"  # workload,threads,median_ms
: >"$points"
IFS=, read -r -a thread_list <<<"$THREADS"

# last_median CSV: the median_ms field of the CSV's last row, found by header name.
last_median() {
  "$PYTHON" -c '
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
if not rows or "median_ms" not in rows[-1]:
    sys.exit("scaling.sh: %s has no median_ms row" % sys.argv[1])
print(rows[-1]["median_ms"])' "$1"
}

# sweep NAME APP ARGS...: runs "APP ARGS --threads T ..." for each T; "{csv}" in ARGS is
# replaced by that run's CSV path.
sweep() {
  local name=$1 app=$2
  shift 2
  if [ ! -x "$BIN/$app" ]; then
    echo "scaling: SKIP $name: $BIN/$app is not built"
    return 0
  fi
  for t in "${thread_list[@]}"; do
    local csv="$tmp/$name-$t.csv" args=()
    for a in "$@"; do args+=("${a//\{csv\}/$csv}"); done
    echo "scaling: $name, $t thread(s): $BIN/$app ${args[*]} --threads $t"
    if ! "$BIN/$app" "${args[@]}" --threads "$t" >"$tmp/$name-$t.log" 2>&1; then
      echo "scaling: SKIP $name: failed at $t thread(s); its output:"
      tail -n 5 "$tmp/$name-$t.log" | sed 's/^/  /'
      return 0
    fi
    echo "$name,$t,$(last_median "$csv")" >>"$points"
  done
}

sweep pi-omp pi --variants omp --repeat "$PI_REPEAT" --out "{csv}"
sweep pi-omp-simd pi --variants omp-simd --repeat "$PI_REPEAT" --out "{csv}"
# shellcheck disable=SC2086  # MNIST_ARGS is a list of flags
sweep mnist-small-b8 mnist --model small --batch 8 --steps "$STEPS_SMALL" --out "$tmp/run.csv" --bench-csv "{csv}" $MNIST_ARGS
# shellcheck disable=SC2086
sweep mnist-small-b128 mnist --model small --batch 128 --steps "$STEPS_SMALL" --out "$tmp/run.csv" --bench-csv "{csv}" $MNIST_ARGS
# shellcheck disable=SC2086
sweep mnist-keras-b128 mnist --model keras --batch 128 --steps "$STEPS_KERAS" --out "$tmp/run.csv" --bench-csv "{csv}" $MNIST_ARGS

rev=$(git describe --always --dirty --abbrev=10 2>/dev/null || echo unknown)
# Speedup against the 1-thread point of the same workload; rows appended through
# scripts/pylib/results_csv.py (atomic, header checked), like the apps' CSV files.
"$PYTHON" - "$points" "$OUT" "$(hostname)" "$rev" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" <<'PY'
import csv, sys
sys.path.insert(0, "scripts/pylib")
from results_csv import HeaderMismatch, write_rows
points, out, host, rev, stamp = sys.argv[1:]
header = ["workload", "threads", "median_ms", "speedup", "efficiency", "host", "git_rev", "timestamp"]
pts = [r for r in csv.reader(open(points, newline="")) if r]
base = {w: float(ms) for w, t, ms in pts if int(t) == 1}
rows = []
print("%-18s %7s %10s %8s %10s" % ("workload", "threads", "median_ms", "speedup", "efficiency"))
for w, t, ms in pts:
    t, ms = int(t), float(ms)
    s = base[w] / ms if w in base else None
    e = s / t if s is not None else None
    rows.append([w, t, "%.3f" % ms, "" if s is None else "%.3f" % s,
                 "" if e is None else "%.3f" % e, host, rev, stamp])
    print("%-18s %7d %10.2f %8s %10s" % (w, t, ms, "-" if s is None else "%.2f" % s,
                                         "-" if e is None else "%.2f" % e))
try:
    write_rows(out, header, rows)
except HeaderMismatch as err:
    sys.exit("scaling.sh: %s" % err)
print("wrote %s (%d new rows)" % (out, len(rows)))
PY
