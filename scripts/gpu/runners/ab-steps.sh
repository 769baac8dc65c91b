#!/usr/bin/env bash
# ab-steps: one change's step times against the code before it, on the same GPU in one command:
# W4 and W5 ms per step (CUDA graph) under each --conv-algo policy and precision, the two
# builds alternating ROUNDS times so that a drift of the machine falls on both.
# Prepare: two bundles of the same binaries (`caltech101 dcgan`), one per revision:
#   BINS="caltech101 dcgan" DATA= BUNDLE=gpu-bundle-before scripts/gpu/prepare.sh   (at the old rev)
#   BINS="caltech101 dcgan ..." DATA= scripts/gpu/prepare.sh                        (at the new rev)
# The bundle before needs only its bin.tar.xz: its env.sh may be the other's (same libraries).
# There: BEFORE=gpu-bundle-before scripts/gpu/visit.sh ab-steps
# -> $RESULTS/steps.csv (the apps' --bench-csv rows, the bundle named in the log), ab.tsv
# (build, workload, policy, precision, round, median ms) and the printed table of medians.
# Knobs: BEFORE (the old bundle, required), POLICIES ("own auto"), PRECISIONS ("fp32 tf32"),
# WORKLOADS ("W4 W5"), ROUNDS (2), STEPS_W4 (60), STEPS_W5 (100), W4_ARGS (more caltech101 flags for
# both builds, e.g. "--loader-threads 8" where their defaults differ).
set -uo pipefail
source "$(dirname "$0")/../host.sh"
need_bin caltech101 dcgan || exit 1
[ -n "${BEFORE:-}" ] || { echo "ab-steps: BEFORE=<bundle of the old revision> is required" >&2; exit 2; }
case $BEFORE in /*) ;; *) BEFORE=$ROOT/$BEFORE ;; esac
[ -d "$BEFORE/bin" ] || tar -xJf "$BEFORE/bin.tar.xz" -C "$BEFORE" || exit 1
before_bin=/tmp/pdnn-bin-before
mkdir -p "$before_bin"
for b in "$BEFORE"/bin/*; do  # as host.sh's wrappers, over the old binaries
  printf '#!/usr/bin/env bash\nsource %s/env.sh\nexec %s "$@"\n' "$BUNDLE" "$b" > "$before_bin/$(basename "$b")"
  chmod +x "$before_bin/$(basename "$b")"
done
has() { case " $2 " in *" $1 "*) return 0 ;; esac; return 1; }
W=${WORKLOADS:-W4 W5}
printf 'build\tworkload\tpolicy\tprecision\tround\tmedian_ms\n' > "$RESULTS/ab.tsv"
run() {  # build dir workload policy precision round
  local build=$1 dir=$2 w=$3 policy=$4 prec=$5 r=$6 log tf=()
  [ "$prec" = tf32 ] && tf=(--tf32)
  log="$RESULTS/${build}_${w}_${policy}_${prec}_r$r.log"
  case $w in
    W4) timeout 150 "$dir/caltech101" --device cuda --steps "${STEPS_W4:-60}" --threads 8 \
          --conv-algo "$policy" "${tf[@]}" ${W4_ARGS:-} --bench-csv "$RESULTS/steps.csv" > "$log" 2>&1 ;;
    W5) timeout 150 "$dir/dcgan" --device cuda --dataset caltech --images-per-epoch 2560 \
          --steps "${STEPS_W5:-100}" --threads 8 --conv-algo "$policy" "${tf[@]}" \
          --bench-csv "$RESULTS/steps.csv" > "$log" 2>&1 ;;
  esac
  local ms
  ms=$(grep '^step_ms' "$log" | grep -o 'median=[0-9.]*' | cut -d= -f2)
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$build" "$w" "$policy" "$prec" "$r" "${ms:-FAILED}" >> "$RESULTS/ab.tsv"
}
stage "A/B: $BEFORE (before) against $BUNDLE (after), ${ROUNDS:-2} rounds"
for r in $(seq "${ROUNDS:-2}"); do
  for w in $W; do
    for policy in ${POLICIES:-own auto}; do
      for prec in ${PRECISIONS:-fp32 tf32}; do
        run before "$before_bin" "$w" "$policy" "$prec" "$r"
        run after "$BIN" "$w" "$policy" "$prec" "$r"
      done
    done
  done
done
py - "$RESULTS/ab.tsv" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
keys = sorted({(r["workload"], r["policy"], r["precision"]) for r in rows})
print("workload policy precision   before ms (rounds)      after ms (rounds)     after/before")
for k in keys:
    med = {}
    for b in ("before", "after"):
        v = [float(r["median_ms"]) for r in rows if (r["workload"], r["policy"], r["precision"]) == k
             and r["build"] == b and r["median_ms"] != "FAILED"]
        med[b] = (statistics.median(v) if v else float("nan"), " ".join("%.3f" % x for x in v))
    print("%-8s %-6s %-9s %8.3f (%s)   %8.3f (%s)   %.3f" % (*k, med["before"][0], med["before"][1],
          med["after"][0], med["after"][1], med["after"][0] / med["before"][0]))
EOF
