#!/usr/bin/env bash
# bench_dcgan.sh: W5 training-step times on the CPU (make bench-dcgan; on a GPU host's CPU
# scripts/gpu/runners/cpu-bench.sh PARTS=dcgan): pdnn against the machine's PyTorch in the same
# run, at each thread count of THREADS (1,2), then both frameworks' per-layer profiles.
#
# Step times. PyTorch (scripts/twins/torch_reference.py dcgan, the tutorial's step) in two
# configurations as scripts/bench/bench_mnist.sh runs them: default, and best (huge pages and kept
# buffers for malloc, passive OpenMP wait, one OpenBLAS thread). An iteration is W5's: D on a
# real and a fake batch of 64, G through D, two Adam updates. Each point is one process running
# STEPS iterations (the first 2 left out); the runs of a thread count alternate pdnn, torch
# default, torch best (the order rotating from round to round), REPEAT rounds, and each round
# first times sgemm 2048^3 at that thread count (build/bin/bench_conv --mode sgemm: the ceiling
# of the moment). A point is the median of its runs' medians; torch_over_pdnn (> 1: pdnn
# faster) is each PyTorch configuration's against pdnn's, and a third row per thread count,
# config "better", takes the faster PyTorch configuration (the yardstick of SPEC.md).
#
# Per-layer profiles, at each thread count: build/bin/dcgan --profile (PROFILE_STEPS steps, the
# first 2 left out) and scripts/twins/torch_dcgan_layers.py (PyTorch's time per layer group in the same
# step, measured through module and gradient hooks, under the settings of its better
# configuration at that thread count), joined by layer: LAYERS_OUT has one row per thread count
# and layer (pdnn's rows name the layer, e.g. D.3 "BatchNorm2d + LeakyReLU", as --profile does).
#
# Rows: OUT (runs/bench/dcgan.csv), LAYERS_OUT (runs/bench/dcgan_layers.csv), both with
# the CPU model, OpenBLAS core, threads, git revision; the profiles' own CSV files next to
# LAYERS_OUT (dcgan_profile_t<T>.csv, dcgan_torch_layers.csv).
# Environment: BIN, PYTHON, OUT, LAYERS_OUT, THREADS, STEPS (8), REPEAT (2), PROFILE_STEPS (6),
# DATA (a folder of MNIST-layout IDX files, the images of both; default Fashion-MNIST through
# datasets/get_fashion_mnist.sh), TORCH=0 (pdnn alone). About 4 minutes on 2 cores with
# PyTorch; on 16 cores with THREADS=1,2,8 about 4 minutes too (each step is faster there).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-build/bin}
PY=${PYTHON:-/usr/bin/python3}
source scripts/bench/blas_env.sh  # PyTorch gets the OpenBLAS kernels pdnn runs
OUT=${OUT:-runs/bench/dcgan.csv}
LAYERS_OUT=${LAYERS_OUT:-runs/bench/dcgan_layers.csv}
THREADS=${THREADS:-1,2}
STEPS=${STEPS:-8}
REPEAT=${REPEAT:-2}
PROFILE_STEPS=${PROFILE_STEPS:-6}
TORCH=${TORCH:-1}
PIN=(OMP_PROC_BIND=close OMP_PLACES=cores)
BEST=(GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967296
      OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=1)
for b in dcgan bench_conv; do
  [ -x "$BIN/$b" ] || { echo "bench_dcgan: $BIN/$b not built (make build)" >&2; exit 1; }
done
if [ -n "${DATA:-}" ]; then
  [ -d "$DATA" ] || { echo "bench_dcgan: DATA=$DATA is no folder" >&2; exit 1; }
  DATA_ARGS=(--dataset mnist --data "$DATA")
  dataset=$(basename "$DATA")
else
  datasets/get_fashion_mnist.sh >/dev/null
  DATA_ARGS=()
  dataset=fashion-mnist
fi
have_torch=0
if [ "$TORCH" = 0 ]; then echo "bench_dcgan: TORCH=0: pdnn only"
elif env -u LD_LIBRARY_PATH "$PY" -c 'import torch' 2>/dev/null; then have_torch=1
else echo "bench_dcgan: no torch for $PY (scripts/tools/install_deps.sh torch): pdnn only" >&2; fi
torch_py() { env -u LD_LIBRARY_PATH "$@"; }  # the host's python keeps its own libraries
host=$(hostname)
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //; s/,/ /g')
torch_version=none
[ $have_torch = 1 ] && torch_version=$(torch_py "$PY" -c 'import torch; print(torch.__version__)')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
hdr=$("$BIN/dcgan" --steps 1 --threads 1 --ngf 1 --ndf 1 "${DATA_ARGS[@]}" | head -1)
blas_core=$(echo "$hdr" | sed -nE 's/.*[|] BLAS ([A-Za-z0-9_]+).*/\1/p')
rev=$(echo "$hdr" | sed -nE 's/.*\| rev ([^ ]+).*/\1/p')  # the measured binary's (a GPU host has no .git)
echo "bench_dcgan: $cpu, $(nproc) CPUs; OpenBLAS core $blas_core" \
     "(OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}); PyTorch $torch_version; $dataset;" \
     "load $(cut -d' ' -f1-3 /proc/loadavg)"
measure() {  # prints "median min max steps"
  local line
  line=$("$@" | grep '^step_ms ') || { echo "bench_dcgan: failed: $*" >&2; return 1; }
  echo "$line" | sed -E 's/.*steps=([0-9]+) median=([0-9.]+) min=([0-9.]+) max=([0-9.]+).*/\2 \3 \4 \1/'
}
sgemm() {  # prints the sgemm 2048^3 GFLOP/s at $1 threads
  env "${PIN[@]}" "$BIN/bench_conv" --mode sgemm --threads "$1" --repeats 3 --warmup 1 |
    sed -nE 's/^sgemm_gflops .*median=([0-9.]+).*/\1/p'
}
configs=(pdnn)
[ $have_torch = 1 ] && configs+=(torch-default torch-best)
for t in ${THREADS//,/ }; do
  for r in $(seq "$REPEAT"); do
    echo "$t $(sgemm "$t")" >> "$tmp/sgemm"
    n=${#configs[@]}
    for j in $(seq 0 $((n - 1))); do
      c=${configs[$(( (j + r) % n ))]}
      case $c in
        pdnn) cmd=(env "${PIN[@]}" "$BIN/dcgan" --threads "$t" --steps "$STEPS" "${DATA_ARGS[@]}") ;;
        torch-default) cmd=(torch_py "$PY" scripts/twins/torch_reference.py dcgan --threads "$t"
                            --steps "$STEPS" "${DATA_ARGS[@]}") ;;
        torch-best) cmd=(torch_py "${BEST[@]}" "$PY" scripts/twins/torch_reference.py dcgan
                         --threads "$t" --steps "$STEPS" "${DATA_ARGS[@]}") ;;
      esac
      read -r med mn mx steps < <(measure "${cmd[@]}")
      printf "threads %s run %s %-14s median %10s ms (min %s, max %s)\n" "$t" "$r" "$c" "$med" "$mn" "$mx"
      echo "$t $c $med $mn $mx $steps" >> "$tmp/runs"
    done
  done
done

# Per-layer profiles: pdnn's, then PyTorch's under its better configuration's settings.
layers_dir=$(dirname "$LAYERS_OUT")
mkdir -p "$layers_dir"
for t in ${THREADS//,/ }; do
  env "${PIN[@]}" "$BIN/dcgan" --threads "$t" --steps "$PROFILE_STEPS" --profile \
    --profile-out "$layers_dir/dcgan_profile_t$t.csv" "${DATA_ARGS[@]}" > "$tmp/profile_$t.log"
  sed -n '/^profile: /,/^total/p' "$tmp/profile_$t.log"
  if [ $have_torch = 1 ]; then
    better=$("$PY" - "$tmp/runs" "$t" <<'PYEOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    t, c, med = line.split()[:3]
    if t == sys.argv[2] and c.startswith("torch"):
        runs.setdefault(c, []).append(float(med))
print(min(runs, key=lambda c: statistics.median(runs[c])) if runs else "torch-default")
PYEOF
)
    settings=()
    [ "$better" = torch-best ] && settings=("${BEST[@]}")
    torch_py "${settings[@]}" "$PY" scripts/twins/torch_dcgan_layers.py --threads "$t" \
      --steps $((PROFILE_STEPS - 2)) --config "${better#torch-}" --rev "$rev" \
      --out "$layers_dir/dcgan_torch_layers.csv" > "$tmp/torch_layers_$t.log"
    cat "$tmp/torch_layers_$t.log"
  fi
done

"$PY" - "$tmp" "$OUT" "$LAYERS_OUT" "$THREADS" "$blas_core" "$dataset" "$rev" "$host" "$cpu" \
  "$torch_version" "$have_torch" <<'PYEOF'
import csv, statistics, sys, datetime
sys.path.insert(0, "scripts/pylib")
from results_csv import write_rows
tmp, out, layers_out, threads, core, dataset, rev, host, cpu, tv, have_torch = sys.argv[1:12]
threads = [int(t) for t in threads.split(",")]
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
pts = {}
for line in open(f"{tmp}/runs"):
    t, c, med, mn, mx, n = line.split()
    pts.setdefault((int(t), c), []).append((float(med), float(mn), float(mx), int(n)))
sg = {}
for line in open(f"{tmp}/sgemm"):
    t, g = line.split()
    sg.setdefault(int(t), []).append(float(g))
header = ("app,config,model,batch,threads,steps,median_ms,min_ms,max_ms,epoch_s,torch_over_pdnn,"
          "sgemm_gflops,blas_core,torch_version,dataset,git_rev,host,cpu_model,timestamp").split(",")
rows = []
print(f"\n{'threads':>7} {'config':14} {'ms/iter':>10} {'s/epoch':>8} {'torch/pdnn':>10} {'sgemm':>7}")
for t in threads:
    pdnn = statistics.median(x[0] for x in pts[(t, "pdnn")])
    gf = f"{statistics.median(sg[t]):.1f}" if sg.get(t) else ""
    meds = {c: statistics.median(x[0] for x in v) for (tt, c), v in pts.items() if tt == t}
    torch_cfgs = sorted(c for c in meds if c != "pdnn")
    order = ["pdnn"] + torch_cfgs + (["better"] if torch_cfgs else [])
    for c in order:
        src = min(torch_cfgs, key=meds.get) if c == "better" else c
        v = pts[(t, src)]
        med = meds[src]
        ratio = "" if c == "pdnn" else f"{med / pdnn:.3f}"
        app, config = ("pdnn", "-") if c == "pdnn" else ("torch", c.replace("torch-", ""))
        if c == "better":
            config = "better:" + src.replace("torch-", "")
        rows.append([app, config, "dcgan", 64, t, sum(x[3] for x in v), f"{med:.1f}",
                     f"{min(x[1] for x in v):.1f}", f"{max(x[2] for x in v):.1f}",
                     f"{46 * med / 1000:.2f}", ratio, gf, core, "" if app == "pdnn" else tv,
                     dataset, rev, host, cpu, now])
        print(f"{t:>7} {config if app == 'torch' else 'pdnn':14} {med:10.1f} {46 * med / 1000:8.2f} {ratio:>10} {gf:>7}")
write_rows(out, header, rows)
print(f"bench_dcgan: {len(rows)} rows appended to {out}")

# The per-layer table: pdnn's profile rows and PyTorch's layer groups, by layer name.
layers_dir = layers_out.rsplit("/", 1)[0] if "/" in layers_out else "."
torch_rows = {}
if have_torch == "1":
    with open(f"{layers_dir}/dcgan_torch_layers.csv") as f:
        for r in csv.DictReader(f):
            if r["git_rev"] == rev and r["host"] == host:
                torch_rows[(int(r["threads"]), r["layer"])] = r  # the latest of this run
lheader = ("layer,kind,threads,pdnn_fwd_ms,pdnn_bwd_ms,pdnn_ms,torch_fwd_ms,torch_bwd_ms,torch_ms,"
           "torch_over_pdnn,torch_config,blas_core,torch_version,git_rev,host,cpu_model,timestamp").split(",")
lrows = []
for t in threads:
    with open(f"{layers_dir}/dcgan_profile_t{t}.csv") as f:
        prof = list(csv.DictReader(f))
    print(f"\nper layer at {t} thread(s), ms per step (fwd + bwd; update rows: the optimizer step)")
    print(f"{'layer':9} {'pdnn':>9} {'torch':>9} {'torch/pdnn':>10}")
    for r in prof:
        name = r["layer"]
        pf, pb = float(r["fwd_ms"]), float(r["bwd_ms"]) + float(r["update_ms"])
        tr = torch_rows.get((t, name))
        tf = float(tr["fwd_ms"]) if tr else None
        tb = float(tr["bwd_ms"]) + float(tr["update_ms"]) if tr else None
        tot = tf + tb if tr else None
        ratio = f"{tot / (pf + pb):.2f}" if tr and pf + pb > 0 else ""
        lrows.append([name, r["kind"], t, f"{pf:.3f}", f"{pb:.3f}", f"{pf + pb:.3f}",
                      f"{tf:.3f}" if tr else "", f"{tb:.3f}" if tr else "",
                      f"{tot:.3f}" if tr else "", ratio, tr["config"] if tr else "", core,
                      tv, rev, host, cpu, now])
        print(f"{name:9} {pf + pb:9.2f} {tot if tot is not None else float('nan'):9.2f} {ratio:>10}")
write_rows(layers_out, lheader, lrows)
print(f"bench_dcgan: {len(lrows)} rows appended to {layers_out}")
PYEOF
