#!/usr/bin/env bash
# ab-steps: one change's step times against the code before it, on the same GPU in one command:
# W4, W5 (and the U-Net's) ms per step (CUDA graph) under each --conv-algo policy and precision,
# the two builds alternating ROUNDS times so that a drift of the machine falls on both.
# Prepare: two bundles of the same binaries (`caltech101 dcgan`), one per revision:
#   BINS="caltech101 dcgan" DATA= BUNDLE=gpu-bundle-before scripts/gpu/prepare.sh   (at the old rev)
#   BINS="caltech101 dcgan ..." DATA= scripts/gpu/prepare.sh                        (at the new rev)
# The bundle before needs only its bin.tar.xz: its env.sh may be the other's (same libraries).
# There: BEFORE=gpu-bundle-before scripts/gpu/visit.sh ab-steps
# -> $RESULTS/steps.csv (the apps' --bench-csv rows, the bundle named in the log), ab.tsv
# (build, workload, policy, precision, round, median ms) and the printed table of medians.
# Knobs: BEFORE (the old bundle, required), POLICIES ("own auto"), PRECISIONS ("fp32 tf32"),
# WORKLOADS ("W4 W5"; UNet: the U-Net at 512x512, batch 4, base 64, depth 4, on datasets/ccp-200,
# `segment` in the bundles), ROUNDS (2), STEPS_W4 (60), STEPS_W5 (100), STEPS_UNET (30), W4_ARGS
# (more caltech101 flags for both builds, e.g. "--loader-threads 8" where their defaults differ),
# W5_ARGS (the same for dcgan), W5_IMAGES (2560: W5's images an epoch). Where the tree cannot
# carry all the photos: W4_ARGS="--data datasets/caltech-w4sub --images-per-epoch 448"
# W5_ARGS="--data datasets/caltech-w4sub" W5_IMAGES=960 (a subset; whole batches an epoch, as
# the full set's 1,280 and 2,560: a block of steps with a partial batch is not timed; made here
# by: for c in datasets/caltech101-6/*/; do d=datasets/caltech-w4sub/$(basename "$c");
# mkdir -p "$d"; ls "$c" | head -170 | while read -r f; do cp "$c/$f" "$d/"; done; done; carried
# with `carry`, datasets/*/ being git-ignored), ALT_ARGS
# (flags for a third variant, `alt`: the new build run with them, e.g. "--batch-copy serial" to
# split one change of two out of the same binary).
set -uo pipefail
source "$(dirname "$0")/../host.sh"
W=${WORKLOADS:-W4 W5}
needs=()
for w in $W; do
  case $w in W4) needs+=(caltech101) ;; W5) needs+=(dcgan) ;; UNet) needs+=(segment) ;; esac
done
need_bin "${needs[@]}" || exit 1
[ -n "${BEFORE:-}" ] || { echo "ab-steps: BEFORE=<bundle of the old revision> is required" >&2; exit 2; }
case $BEFORE in /*) ;; *) BEFORE=$ROOT/$BEFORE ;; esac
[ -d "$BEFORE/bin" ] || tar -xJf "$BEFORE/bin.tar.xz" -C "$BEFORE" || exit 1
before_bin=/tmp/pdnn-bin-before
mkdir -p "$before_bin"
for b in "$BEFORE"/bin/*; do  # as host.sh's wrappers, over the old binaries
  printf '#!/usr/bin/env bash\nsource %s/env.sh\nexec %s "$@"\n' "$BUNDLE" "$b" > "$before_bin/$(basename "$b")"
  chmod +x "$before_bin/$(basename "$b")"
done
printf 'build\tworkload\tpolicy\tprecision\tround\tmedian_ms\n' > "$RESULTS/ab.tsv"
run() {  # build dir workload policy precision round
  local build=$1 dir=$2 w=$3 policy=$4 prec=$5 r=$6 log extra=()
  [ "$build" = alt ] && read -r -a extra <<< "$ALT_ARGS"
  log="$RESULTS/${build}_${w}_${policy}_${prec}_r$r.log"
  case $w in
    W4) timeout 150 "$dir/caltech101" --device cuda --steps "${STEPS_W4:-60}" --threads 8 \
          --conv-algo "$policy" --precision "$prec" ${W4_ARGS:-} "${extra[@]}" \
          --bench-csv "$RESULTS/steps.csv" > "$log" 2>&1 ;;
    UNet) timeout 150 "$dir/segment" --device cuda --size 512 --batch 4 --base 64 --depth 4 \
          --steps "${STEPS_UNET:-30}" --threads 8 --conv-algo "$policy" --precision "$prec" \
          --overlays 0 "${extra[@]}" --bench-csv "$RESULTS/steps.csv" > "$log" 2>&1 ;;
    W5) timeout 150 "$dir/dcgan" --device cuda --dataset caltech --images-per-epoch "${W5_IMAGES:-2560}" \
          --steps "${STEPS_W5:-100}" --threads 8 --conv-algo "$policy" --precision "$prec" ${W5_ARGS:-} \
          "${extra[@]}" --bench-csv "$RESULTS/steps.csv" > "$log" 2>&1 ;;
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
        [ -n "${ALT_ARGS:-}" ] && run alt "$BIN" "$w" "$policy" "$prec" "$r"
      done
    done
  done
done
py - "$RESULTS/ab.tsv" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
keys = sorted({(r["workload"], r["policy"], r["precision"]) for r in rows})
builds = [b for b in ("before", "after", "alt") if any(r["build"] == b for r in rows)]
print("workload policy precision " + "".join("  %s ms (rounds)      " % b for b in builds)
      + "".join("  %s/before" % b for b in builds[1:]))
for k in keys:
    med = {}
    for b in builds:
        v = [float(r["median_ms"]) for r in rows if (r["workload"], r["policy"], r["precision"]) == k
             and r["build"] == b and r["median_ms"] != "FAILED"]
        med[b] = (statistics.median(v) if v else float("nan"), " ".join("%.3f" % x for x in v))
    print("%-8s %-6s %-9s" % k + "".join("   %8.3f (%s)" % med[b] for b in builds)
          + "".join("   %.3f" % (med[b][0] / med["before"][0]) for b in builds[1:]))
EOF
