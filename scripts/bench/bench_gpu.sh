#!/usr/bin/env bash
# bench_gpu.sh: ms per training step on the GPU, pdnn against PyTorch in the same run (the
# `make bench-gpu` target; run it on a machine with a GPU and a CUDA build of pdnn):
#   W2 b8, W2 b128, W3 b128 (mnist app --steps, on MNIST-layout data) and W4 (caltech101 app
#   --steps on the Caltech photos, batch 64 at 224x224, packed ahead into pinned memory by the
#   loader), each eager and as one CUDA graph, in fp32 and TF32; PyTorch the same way
#   (scripts/twins/torch_gpu_bench.py; W4 eager only: its Adagrad cannot be captured); pi on the GPU
#   (build/bin/pi --variants cuda-fp64,cuda-fp32).
# Rows: runs/bench/gpu.csv (and runs/pi/pi_gpu.csv, or pi_gpu.csv beside a given OUT); a
# ratio table at the end.
# Environment: BIN (build/bin), PYTHON (python3, the one with torch), STEPS (300), DATA
# (datasets/mnist-npm10k), CALTECH_DATA (datasets/caltech101-6), OUT (runs/bench/gpu.csv),
# TORCH=0 to skip PyTorch, PI=0 to skip pi, WORKLOADS (W2b8 W2b128 W3; W4 on request).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-build/bin}
PYTHON=${PYTHON:-python3}
STEPS=${STEPS:-300}
DATA=${DATA:-datasets/mnist-npm10k}
CALTECH_DATA=${CALTECH_DATA:-datasets/caltech101-6}
OUT=${OUT:-runs/bench/gpu.csv}
PI_OUT=${PI_OUT:-$( [ "$OUT" = runs/bench/gpu.csv ] && echo runs/pi/pi_gpu.csv || echo "$(dirname "$OUT")/pi_gpu.csv")}
TORCH=${TORCH:-1}
PI=${PI:-1}
WORKLOADS=${WORKLOADS:-W2b8 W2b128 W3}
COLUMNS="app,workload,model,batch,device,gpu,mode,precision,steps,median_ms,min_ms,max_ms,versions,git_rev,host,timestamp"
for w in $WORKLOADS; do
  case $w in
    W4) [ -x "$BIN/caltech101" ] || { echo "bench_gpu: no $BIN/caltech101 (build first)" >&2; exit 1; }
        [ -d "$CALTECH_DATA" ] || { echo "bench_gpu: no $CALTECH_DATA (datasets/get_caltech101.sh)" >&2; exit 1; } ;;
    *) [ -x "$BIN/mnist" ] || { echo "bench_gpu: no $BIN/mnist (build first: make build)" >&2; exit 1; }
       [ -d "$DATA" ] || { echo "bench_gpu: no $DATA (datasets/get_mnist.sh)" >&2; exit 1; } ;;
  esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rev=$(git describe --always --dirty --abbrev=10 2>/dev/null || echo unknown)

for w in $WORKLOADS; do
  case $w in
    W2b8) model=small batch=8 ;;
    W2b128) model=small batch=128 ;;
    W3) model=keras batch=128 ;;
    W4) model=caltech9 batch=64 ;;
    *) echo "bench_gpu: unknown workload $w" >&2; exit 2 ;;
  esac
  for mode in eager graph; do
    graph=$([ $mode = graph ] && echo on || echo off)
    for prec in fp32 tf32; do
      tf32=$([ $prec = tf32 ] && echo --tf32 || true)
      if [ $w = W4 ]; then
        log=$("$BIN/caltech101" --device cuda --data "$CALTECH_DATA" --steps "$STEPS" \
                --cuda-graph $graph $tf32 --threads 1)
        hdr=$(echo "$log" | grep -m1 '^caltech101:')
      else
        log=$("$BIN/mnist" --device cuda --model $model --batch $batch --data "$DATA" \
                --steps "$STEPS" --cuda-graph $graph $tf32 --threads 1)
        hdr=$(echo "$log" | grep -m1 '^mnist:')
      fi
      line=$(echo "$log" | grep '^step_ms ')
      gpu=$(echo "$hdr" | sed -nE 's/.*\| cuda: (.*) \| (fp32|TF32), CUDA graph.*/\1/p')
      med=$(echo "$line" | sed -E 's/.*median=([0-9.]+).*/\1/')
      lo=$(echo "$line" | sed -E 's/.*min=([0-9.]+).*/\1/')
      hi=$(echo "$line" | sed -E 's/.*max=([0-9.]+).*/\1/')
      n=$(echo "$line" | sed -E 's/.*steps=([0-9]+).*/\1/')
      runmode=$(echo "$line" | sed -E 's/.*mode=([a-z]+).*/\1/')
      printf 'pdnn  %-7s %-5s %s: median %s ms/step (min %s, max %s)\n' $w $runmode $prec "$med" "$lo" "$hi"
      env -u LD_LIBRARY_PATH python3 -c 'import csv,sys; csv.writer(sys.stdout, lineterminator="\n").writerow(sys.argv[1:])' \
        pdnn $w $model $batch cuda "$gpu" "$runmode" $prec "$n" "$med" "$lo" "$hi" \
        "pdnn $(echo "$gpu" | sed -E 's/.*(driver [0-9.]+, runtime [0-9.]+).*/\1/')" \
        "$rev" "$(hostname)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >> "$tmp/rows.csv"
    done
  done
done
env -u LD_LIBRARY_PATH python3 scripts/pylib/results_csv.py append "$tmp/pdnn.csv" "$COLUMNS" < "$tmp/rows.csv"
if [ "$TORCH" = 1 ]; then
  # Without the bundle's LD_LIBRARY_PATH: PyTorch brings its own CUDA libraries.
  ws=$(echo $WORKLOADS | tr ' ' ',')
  env -u LD_LIBRARY_PATH "$PYTHON" scripts/twins/torch_gpu_bench.py --workloads "$ws" \
    --steps "$STEPS" --out "$tmp/torch.csv" || echo "bench_gpu: PyTorch run failed" >&2
fi
# W1 on the GPU: pdnn's kernel, and (same run) a CuPy raw kernel written the blog's way.
if [ "$PI" = 1 ]; then
  "$BIN/pi" --variants cuda-fp64,cuda-fp32 --repeat 20 --warmup 3 --out "$PI_OUT"
  if [ "$TORCH" = 1 ]; then
    env -u LD_LIBRARY_PATH "$PYTHON" scripts/twins/cupy_pi.py || echo "bench_gpu: CuPy pi failed" >&2
  fi
fi
env -u LD_LIBRARY_PATH python3 - "$tmp" "$OUT" "$COLUMNS" <<'EOF'
import csv, os, sys
sys.path.insert(0, "scripts/pylib")
from results_csv import write_rows
tmp, out, cols = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
rows = []
for f in ("pdnn.csv", "torch.csv"):
    p = os.path.join(tmp, f)
    if os.path.exists(p):
        rows += list(csv.DictReader(open(p)))
write_rows(out, cols, [[r[c] for c in cols] for r in rows])
get = lambda app, w, m, p: next((float(r["median_ms"]) for r in rows if (r["app"], r["workload"], r["mode"], r["precision"]) == (app, w, m, p)), None)
print(f"\n{'workload':8s} {'precision':9s} {'pdnn eager':>10s} {'pdnn graph':>10s} {'torch eager':>11s} {'torch graph':>11s} {'eager x':>8s} {'graph x':>8s}")
for w in dict.fromkeys(r["workload"] for r in rows):
    for p in ("fp32", "tf32"):
        pe, pg, te, tg = (get("pdnn", w, "eager", p), get("pdnn", w, "graph", p),
                          get("torch", w, "eager", p), get("torch", w, "graph", p))
        f = lambda v: f"{v:.4f}" if v else "-"
        x = lambda a, b: f"{a / b:.2f}" if a and b else "-"
        print(f"{w:8s} {p:9s} {f(pe):>10s} {f(pg):>10s} {f(te):>11s} {f(tg):>11s} {x(te, pe):>8s} {x(tg, pg):>8s}")
print(f"\n(ms per step; 'x' = PyTorch / pdnn in the same run) rows appended to {out}")
EOF
