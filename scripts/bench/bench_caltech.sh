#!/usr/bin/env bash
# Seconds per W4 training step (caltech9, batch 64, 3x224x224, AdaGrad) at 1 and 2 threads
# (THREADS="1,2"), for pdnn (build/bin/caltech101 --steps) and, when Debian's torch is
# importable, PyTorch (scripts/twins/torch_reference.py caltech --steps) in the same run, in two
# configurations (as scripts/bench/bench_mnist.sh):
#   default  as installed, no settings;
#   best     malloc with transparent huge pages that keeps freed buffers (GLIBC_TUNABLES),
#            OpenMP workers that sleep instead of spinning (OMP_WAIT_POLICY=passive) and a
#            one-thread OpenBLAS that does not fight OpenMP's pool (OPENBLAS_NUM_THREADS=1).
# The machine is shared and noisy, so: ROUNDS rounds, each running every (framework, setting,
# thread count) once as its own process of STEPS steps (the first 2 left out), in an order that
# rotates from round to round; a point's value is the median over rounds of each run's median
# step (min and max: the extremes of all timed steps). Each round also times sgemm 2048^3
# (build/bin/bench_conv --mode sgemm) at each thread count: the ceiling of that moment.
# Then pdnn's per-layer profile (--profile, PROFILE_STEPS steps) at each thread count, and each
# convolution's achieved GFLOP/s (direct-convolution FLOPs over its time, so Winograd can pass
# the ceiling) against the sgemm rate measured right before it.
# Rows: OUT (runs/bench/caltech.csv): one per framework, setting and thread count, with the
# ratio PyTorch / pdnn (> 1: pdnn faster), ms per step as in bench_mnist.sh's; LAYERS_OUT (runs/bench/caltech_layers.csv): one
# per convolution and thread count; the profiles as caltech_profile_t<T>.csv beside OUT.
# Also printed: pdnn against the im2col floor, a step's FLOPs (3 x forward) at the sgemm rate.
# Environment: BIN, PYTHON, OUT, LAYERS_OUT, THREADS, ROUNDS (3), STEPS (5), PROFILE_STEPS (4),
# DATA, TORCH=0 (pdnn alone). About 25 minutes on 2 cores (PyTorch 1.13 takes 10-20 s a step there).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-build/bin}
PY=${PYTHON:-/usr/bin/python3}
source scripts/bench/blas_env.sh  # PyTorch gets the OpenBLAS kernels pdnn runs
OUT=${OUT:-runs/bench/caltech.csv}
LAYERS_OUT=${LAYERS_OUT:-runs/bench/caltech_layers.csv}
THREADS=${THREADS:-1,2}
ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-5}
PROFILE_STEPS=${PROFILE_STEPS:-4}
DATA=${DATA:-datasets/caltech101-6}
TORCH=${TORCH:-1}
PIN=(OMP_PROC_BIND=close OMP_PLACES=cores)
BEST=(GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967296
      OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=1)

for b in caltech101 bench_conv; do
  [ -x "$BIN/$b" ] || { echo "bench_caltech: $BIN/$b not built (make build)" >&2; exit 1; }
done
[ -d "$DATA" ] || { echo "bench_caltech: no $DATA (datasets/get_caltech101.sh)" >&2; exit 1; }
have_torch=0
if [ "$TORCH" = 0 ]; then echo "bench_caltech: TORCH=0: pdnn only"
elif "$PY" -c 'import torch' 2>/dev/null; then have_torch=1
else echo "bench_caltech: no torch for $PY (scripts/tools/install_deps.sh torch): pdnn only" >&2; fi

rev=$(git describe --always --dirty --abbrev=10 2>/dev/null || echo unknown)
host=$(hostname)
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //; s/,/ /g')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The photos' data set name, the OpenBLAS kernel set and a batch's forward FLOPs, from the
# header and model summary pdnn prints.
"$BIN/caltech101" --data "$DATA" --steps 1 --threads 1 > "$tmp/probe.log"
dataset=$(sed -nE 's/^caltech101: model caltech9, dataset ([^ ]+) .*/\1/p' "$tmp/probe.log")
blas_core=$(sed -nE 's/^caltech101: .*[|] BLAS ([A-Za-z0-9_]+).*/\1/p' "$tmp/probe.log")
fwd_mflops=$(sed -nE 's/^Forward: ([0-9.]+) MFLOPs per batch.*/\1/p' "$tmp/probe.log")
echo "bench_caltech: $dataset, OpenBLAS core $blas_core (OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}),"\
     "$ROUNDS rounds x $STEPS steps per run, configurations alternating; machine $cpu, $(nproc) cores"
echo "bench_caltech: the machine may be shared: compare the numbers of one run only"

# One run: appends "config threads median min max steps" to $tmp/runs.
measure() {
  local config=$1 t=$2 line
  shift 2
  line=$("$@" | grep '^step_ms ') || { echo "bench_caltech: failed: $*" >&2; return 1; }
  echo "$config $t $(echo "$line" | sed -E 's/.*steps=([0-9]+) median=([0-9.]+) min=([0-9.]+) max=([0-9.]+).*/\2 \3 \4 \1/')" >> "$tmp/runs"
  echo "  round $r: $config, $t thread(s): $(echo "$line" | sed -E 's/.*median=([0-9.]+).*/\1/') ms/step"
}
sgemm() {  # appends "threads gflops" to $tmp/sgemm
  "$BIN/bench_conv" --mode sgemm --threads "$1" --repeats 3 --warmup 1 |
    sed -nE 's/^sgemm_gflops threads=([0-9]+) .*median=([0-9.]+).*/\1 \2/p' >> "$tmp/sgemm"
}

configs=(pdnn)
[ $have_torch = 1 ] && configs+=(torch-default torch-best)
for r in $(seq 1 "$ROUNDS"); do
  for t in ${THREADS//,/ }; do
    sgemm "$t"
    n=${#configs[@]}
    for j in $(seq 0 $((n - 1))); do
      c=${configs[$(( (j + r) % n ))]}
      case $c in
        pdnn) measure pdnn "$t" env "${PIN[@]}" "$BIN/caltech101" --data "$DATA" --threads "$t" \
                --steps "$STEPS" ;;
        torch-default) measure torch-default "$t" "$PY" scripts/twins/torch_reference.py caltech \
                         --threads "$t" --steps "$STEPS" ;;
        torch-best) measure torch-best "$t" env "${BEST[@]}" "$PY" scripts/twins/torch_reference.py \
                      caltech --threads "$t" --steps "$STEPS" ;;
      esac
    done
  done
done

# The per-layer profile at each thread count, with the sgemm rate of that moment.
for t in ${THREADS//,/ }; do
  "$BIN/bench_conv" --mode sgemm --threads "$t" --repeats 3 --warmup 1 |
    sed -nE 's/^sgemm_gflops threads=([0-9]+) .*median=([0-9.]+).*/\1 \2/p' > "$tmp/ceiling_$t"
  env "${PIN[@]}" "$BIN/caltech101" --data "$DATA" --threads "$t" --steps "$PROFILE_STEPS" --profile \
    --profile-out "$(dirname "$OUT")/caltech_profile_t$t.csv" > "$tmp/profile_$t.log"
  sed -n '/^profile: /,/^total/p' "$tmp/profile_$t.log"
done

env -u LD_LIBRARY_PATH "$PY" - "$tmp" "$OUT" "$LAYERS_OUT" "$THREADS" "$fwd_mflops" \
  "$blas_core" "$dataset" "$rev" "$host" "$cpu" <<'EOF'
import csv, os, statistics, sys
sys.path.insert(0, "scripts/pylib")
from results_csv import write_rows, utc_now
tmp, out, layers_out, threads, fwd_mflops, core, dataset, rev, host, cpu = sys.argv[1:]
threads = [int(t) for t in threads.split(",")]
runs = {}
for line in open(f"{tmp}/runs"):
    c, t, med, lo, hi, n = line.split()
    runs.setdefault((c, int(t)), []).append((float(med), float(lo), float(hi), int(n)))
sg = {}
for line in open(f"{tmp}/sgemm"):
    t, g = line.split()
    sg.setdefault(int(t), []).append(float(g))
rows, table = [], []
for t in threads:
    pd = runs.get(("pdnn", t))
    pdnn_s = statistics.median(r[0] for r in pd) / 1e3 if pd else None
    ceiling = statistics.median(sg.get(t, [0.0]))
    for c in ("pdnn", "torch-default", "torch-best"):
        rs = runs.get((c, t))
        if not rs:
            continue
        med = statistics.median(r[0] for r in rs)
        lo, hi = min(r[1] for r in rs), max(r[2] for r in rs)
        ratio = "" if c == "pdnn" or not pdnn_s else f"{med / 1e3 / pdnn_s:.3f}"
        app, config = ("pdnn", "-") if c == "pdnn" else ("torch", c.split("-")[1])
        rows.append([app, config, "caltech9", 64, t, len(rs), sum(r[3] for r in rs),
                     f"{med:.1f}", f"{lo:.1f}", f"{hi:.1f}", ratio, f"{ceiling:.1f}", core,
                     dataset, rev, host, cpu, utc_now()])
    tb = [statistics.median(r[0] for r in runs[(c, t)]) / 1e3
          for c in ("torch-default", "torch-best") if (c, t) in runs]
    table.append((t, pdnn_s, tb, ceiling))
write_rows(out, ["app", "config", "model", "batch", "threads", "runs", "steps", "median_ms",
                 "min_ms", "max_ms", "torch_over_pdnn", "sgemm_gflops", "blas_core", "dataset",
                 "git_rev", "host", "cpu_model", "timestamp"], rows)

print("\nseconds per W4 step (batch 64), medians over rounds; x = PyTorch's better / pdnn "
      "(target >= 1.6)")
print(f"{'threads':>7} {'pdnn':>8} {'torch def':>10} {'torch best':>10} {'x':>6} "
      f"{'sgemm GF/s':>10} {'floor s':>8} {'pdnn/floor':>10}")
step_gflop = 3 * float(fwd_mflops) / 1e3
for t, p, tb, ceiling in table:
    floor = step_gflop / ceiling if ceiling > 0 else 0
    f = lambda v: f"{v:.2f}" if v else "-"  # noqa: E731
    better = min(tb) if tb else None
    print(f"{t:>7} {f(p):>8} {f(tb[0] if len(tb) > 0 else None):>10} "
          f"{f(tb[1] if len(tb) > 1 else None):>10} "
          f"{(f'{better / p:.2f}' if better and p else '-'):>6} {ceiling:>10.1f} {floor:>8.2f} "
          f"{(f'{p / floor:.2f}' if p and floor else '-'):>10}")
print(f"(floor: a step's {step_gflop:.0f} GFLOP (3 x forward) at the sgemm rate of the same "
      "run, the time of im2col + GEMM with no overhead; Winograd needs fewer multiplies)")

layer_rows = []
print("\nconvolutions: achieved GFLOP/s (3 x forward FLOPs / (fwd + bwd)) against sgemm")
for t in threads:
    ceiling = float(open(f"{tmp}/ceiling_{t}").read().split()[1])
    for r in csv.DictReader(open(os.path.join(os.path.dirname(out), f"caltech_profile_t{t}.csv"))):
        if r["kind"] != "Conv2d":
            continue
        g = float(r["gflops"])
        print(f"  {t} thread(s) layer {r['layer']:>2} {r['output_shape']:>18} "
              f"fwd {float(r['fwd_ms']):8.1f} ms bwd {float(r['bwd_ms']):8.1f} ms "
              f"{g:7.1f} GFLOP/s = {g / ceiling:.2f} x sgemm ({ceiling:.0f})")
        layer_rows.append(["pdnn", "caltech9", 64, t, r["layer"], r["output_shape"],
                           r["fwd_ms"], r["bwd_ms"], f"{g:.1f}", f"{ceiling:.1f}",
                           f"{g / ceiling:.3f}", core, rev, host, cpu, utc_now()])
write_rows(layers_out, ["app", "model", "batch", "threads", "layer", "output_shape", "fwd_ms",
                        "bwd_ms", "gflops", "sgemm_gflops", "of_sgemm", "blas_core", "git_rev",
                        "host", "cpu_model", "timestamp"], layer_rows)
print(f"\nrows appended to {out} and {layers_out}; profiles in "
      f"{os.path.join(os.path.dirname(out), 'caltech_profile_t<T>.csv')}")
EOF
