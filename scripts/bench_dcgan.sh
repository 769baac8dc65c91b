#!/usr/bin/env bash
# bench_dcgan.sh: W5 iteration times on the CPU (make bench-dcgan): pdnn against PyTorch 1.13
# (Debian's) in the same run, at each thread count of THREADS (1,2), PyTorch in two
# configurations as scripts/bench_mnist.sh runs them (default; best: huge pages and kept
# buffers for malloc, passive OpenMP wait, one OpenBLAS thread). An iteration is W5's: D on a
# real and a fake batch of 64, G through D, two Adam updates. Each point is one process running
# STEPS iterations (the first 2 left out); the epoch column is 46 x the median (2,944 images).
# Rows: results/bench/dcgan.csv (OUT=...), with torch / pdnn (> 1: pdnn faster). The runs of a
# thread count alternate pdnn, torch default, torch best, REPEAT times (medians then taken per
# configuration over all their iterations), to spread a shared machine's noise evenly.
# Environment: BIN, PYTHON, OUT, THREADS, STEPS (8), REPEAT (2), TORCH=0 (pdnn alone).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/bin}
PY=${PYTHON:-/usr/bin/python3}
OUT=${OUT:-results/bench/dcgan.csv}
THREADS=${THREADS:-1,2}
STEPS=${STEPS:-8}
REPEAT=${REPEAT:-2}
TORCH=${TORCH:-1}
PIN=(OMP_PROC_BIND=close OMP_PLACES=cores)
BEST=(GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967296
      OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=1)
[ -x "$BIN/dcgan" ] || { echo "bench_dcgan: $BIN/dcgan not built (make build)" >&2; exit 1; }
datasets/get_fashion_mnist.sh >/dev/null
have_torch=0
if [ "$TORCH" = 0 ]; then echo "bench_dcgan: TORCH=0: pdnn only"
elif "$PY" -c 'import torch' 2>/dev/null; then have_torch=1
else echo "bench_dcgan: no torch for $PY (scripts/install_deps.sh torch): pdnn only" >&2; fi
rev=$(git describe --always --dirty --abbrev=10 2>/dev/null || echo unknown)
host=$(hostname)
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //; s/,/ /g')
header="app,config,model,batch,threads,steps,median_ms,min_ms,max_ms,epoch_s,torch_over_pdnn,blas_core,dataset,git_rev,host,cpu_model,timestamp"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
hdr=$("$BIN/dcgan" --steps 1 --threads 1 --ngf 1 --ndf 1 | head -1)
blas_core=$(echo "$hdr" | sed -nE 's/.*BLAS ([A-Za-z0-9_]+).*/\1/p')
echo "bench_dcgan: OpenBLAS core $blas_core (OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}); load $(cut -d' ' -f1-3 /proc/loadavg)"
measure() {  # prints "median min max steps"
  local line
  line=$("$@" | grep '^step_ms ') || { echo "bench_dcgan: failed: $*" >&2; return 1; }
  echo "$line" | sed -E 's/.*steps=([0-9]+) median=([0-9.]+) min=([0-9.]+) max=([0-9.]+).*/\2 \3 \4 \1/'
}
configs=(pdnn)
[ $have_torch = 1 ] && configs+=(torch-default torch-best)
for t in ${THREADS//,/ }; do
  for r in $(seq "$REPEAT"); do
    for c in "${configs[@]}"; do
      case $c in
        pdnn) cmd=(env "${PIN[@]}" "$BIN/dcgan" --threads "$t" --steps "$STEPS") ;;
        torch-default) cmd=(env "$PY" scripts/torch_reference.py dcgan --threads "$t" --steps "$STEPS") ;;
        torch-best) cmd=(env "${BEST[@]}" "$PY" scripts/torch_reference.py dcgan --threads "$t" --steps "$STEPS") ;;
      esac
      read -r med mn mx n < <(measure "${cmd[@]}")
      printf "threads %s run %s %-14s median %10s ms (min %s, max %s)\n" "$t" "$r" "$c" "$med" "$mn" "$mx"
      echo "$t $c $med $mn $mx $n" >> "$tmp/runs"
    done
  done
done
# Per thread count and configuration: the median of the runs' medians, min of mins, max of
# maxes, steps summed; the ratio against pdnn's.
"$PY" - "$tmp/runs" "$OUT" "$header" "$blas_core" "$rev" "$host" "$cpu" <<'PYEOF'
import statistics, sys, datetime, os
sys.path.insert(0, "scripts")
from results_csv import write_rows
runs, out, header, core, rev, host, cpu = sys.argv[1:8]
pts = {}
for line in open(runs):
    t, c, med, mn, mx, n = line.split()
    pts.setdefault((t, c), []).append((float(med), float(mn), float(mx), int(n)))
rows = []
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
print(f"\n{'threads':>7} {'config':14} {'ms/iter':>10} {'s/epoch':>8} {'torch/pdnn':>10}")
for (t, c), v in sorted(pts.items(), key=lambda kv: (int(kv[0][0]), kv[0][1] != "pdnn", kv[0][1])):
    med = statistics.median(x[0] for x in v)
    pdnn = statistics.median(x[0] for x in pts[(t, "pdnn")])
    ratio = "" if c == "pdnn" else f"{med / pdnn:.3f}"
    app, config = ("pdnn", "-") if c == "pdnn" else ("torch", c.split("-")[1])
    rows.append([app, config, "dcgan", 64, t, sum(x[3] for x in v), f"{med:.1f}",
                 f"{min(x[1] for x in v):.1f}", f"{max(x[2] for x in v):.1f}",
                 f"{46 * med / 1000:.2f}", ratio, core, "fashion-mnist", rev, host, cpu, now])
    print(f"{t:>7} {c:14} {med:10.1f} {46 * med / 1000:8.2f} {ratio:>10}")
write_rows(out, header.split(","), rows)
print(f"bench_dcgan: {len(rows)} rows appended to {out}")
PYEOF
