#!/usr/bin/env bash
# conv-ab: one kernel change's convolution passes against the code before it, on the same GPU in
# one command: bench_conv_gpu of the two builds alternating ROUNDS times over each FILTERS entry,
# so that a drift of the machine falls on both.
# Prepare: two bundles of bench_conv_gpu, one per revision (the old one needs only bin.tar.xz):
#   scripts/gpu/prepare.sh --bundle gpu-bundle-before build-gpu/bin/bench_conv_gpu   (old rev)
#   BINS="bench_conv_gpu ..." DATA= scripts/gpu/prepare.sh                          (new rev)
# There: BEFORE=gpu-bundle-before scripts/gpu/visit.sh conv-ab
# -> $RESULTS/before.csv, after.csv (bench_conv_gpu's rows), the logs, ab.tsv and the printed
# table: per layer and pass, the median over rounds of each build's median ms, after/before.
# Knobs: BEFORE (required), FILTERS ("W4 W5": one bench_conv_gpu --filter each), ALGOS (direct),
# PRECISIONS (bf16), REPEAT (10), ROUNDS (2).
set -uo pipefail
source "$(dirname "$0")/../host.sh"
need_bin bench_conv_gpu || exit 1
[ -n "${BEFORE:-}" ] || { echo "conv-ab: BEFORE=<bundle of the old revision> is required" >&2; exit 2; }
case $BEFORE in /*) ;; *) BEFORE=$ROOT/$BEFORE ;; esac
[ -d "$BEFORE/bin" ] || tar -xJf "$BEFORE/bin.tar.xz" -C "$BEFORE" || exit 1
[ -x "$BEFORE/bin/bench_conv_gpu" ] || { echo "conv-ab: no bin/bench_conv_gpu in $BEFORE" >&2; exit 1; }
before=/tmp/pdnn-bin-before-conv
printf '#!/usr/bin/env bash\nsource %s/env.sh\nexec %s "$@"\n' "$BUNDLE" "$BEFORE/bin/bench_conv_gpu" > "$before"
chmod +x "$before"
stage "A/B: $BEFORE (before) against $BUNDLE (after), ${ROUNDS:-2} rounds"
for r in $(seq "${ROUNDS:-2}"); do
  for f in ${FILTERS:-W4 W5}; do
    for build in before after; do
      exe=$before; [ $build = after ] && exe=$BIN/bench_conv_gpu
      timeout 200 "$exe" --filter "$f" --algos "${ALGOS:-direct}" --precisions "${PRECISIONS:-bf16}" \
        --repeat "${REPEAT:-10}" --out "$RESULTS/$build.csv" > "$RESULTS/${build}_${f}_r$r.log" 2>&1 \
        || echo "conv-ab: $build $f round $r failed (rc $?): $RESULTS/${build}_${f}_r$r.log"
    done
  done
done
py - "$RESULTS" <<'EOF'
import csv, statistics, sys, os
res = sys.argv[1]
med = {}
for b in ("before", "after"):
    p = os.path.join(res, b + ".csv")
    for r in (csv.DictReader(open(p)) if os.path.exists(p) else []):
        if r["workload"] == "ceiling" or not r["median_ms"]:
            continue
        k = (r["workload"], r["layer"], r["pass"], r["algo"], r["precision"])
        med.setdefault(k, {}).setdefault(b, []).append(float(r["median_ms"]))
with open(os.path.join(res, "ab.tsv"), "w") as out:
    out.write("workload\tlayer\tpass\talgo\tprecision\tbefore_ms\tafter_ms\tafter_over_before\n")
    tot = {}
    for k in sorted(med):
        m = {b: statistics.median(v) for b, v in med[k].items()}
        if len(m) < 2:
            print("%-4s %-8s %-12s %-8s %-5s only %s" % (*k, " ".join(m)))
            continue
        line = "%s\t%.4f\t%.4f\t%.3f" % ("\t".join(k), m["before"], m["after"], m["after"] / m["before"])
        out.write(line + "\n")
        print("%-4s %-8s %-12s %-8s %-5s %8.3f -> %8.3f ms  %.3f" % (*k, m["before"], m["after"], m["after"] / m["before"]))
        t = tot.setdefault((k[0], k[2]), [0.0, 0.0])
        t[0] += m["before"]; t[1] += m["after"]
    for (w, p), (a, b) in sorted(tot.items()):
        print("sum %-4s %-12s %8.3f -> %8.3f ms  %.3f" % (w, p, a, b, b / a))
EOF
