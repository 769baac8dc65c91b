#!/usr/bin/env bash
# ncu-step: every kernel of a training step, each timed alone by Nsight Compute, grouped by name
# (scripts/report/ncu_step.py: the step is the launch sequence that repeats). The first SKIP
# launches (loading, the algorithms' timing, the graph's capture, some steps) run unprofiled,
# so the algorithms are the ones a plain run chooses; the run keeps no algorithm cache
# (--conv-algo-cache none), so nothing timed under ncu's slowdown reaches a later run (the
# sixteenth session's trap: a cache written under ncu made the next W5 run 7.5x slower).
# -> $RESULTS/ncu_<workload>_<precision>_<policy>.csv.gz and .txt (the summary).
# Prepare: BINS="dcgan" (W5) or "caltech101" (W4) DATA= scripts/gpu/prepare.sh; both read
#   datasets/caltech-w4sub (carry it).
# Knobs: WORKLOAD (W5 or W4), PRECISION (bf16), POLICY (own), SKIP (6000), COUNT (500: a W5 step
#   is ~220 launches, and the summary needs 1.5 steps or more), STEPS (60 for W5; enough that
#   SKIP + COUNT launches happen). Compare two runs: scripts/report/ncu_step.py compare A B.
set -uo pipefail
source "$(dirname "$0")/../host.sh"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -n1)
[ -n "$NCU" ] || { echo "ncu-step: no ncu on this host"; exit 1; }
W=${WORKLOAD:-W5} PREC=${PRECISION:-bf16} POL=${POLICY:-own}
case $W in
  W5) need_bin dcgan || exit 1
      app=("$BIN/dcgan" --dataset caltech --data datasets/caltech-w4sub --images-per-epoch 960
           --steps "${STEPS:-60}") ;;
  W4) need_bin caltech101 || exit 1
      app=("$BIN/caltech101" --data datasets/caltech-w4sub --images-per-epoch 448
           --steps "${STEPS:-60}") ;;
  *) echo "ncu-step: WORKLOAD $W: W5 or W4" >&2; exit 2 ;;
esac
out="$RESULTS/ncu_${W}_${PREC}_${POL}"
stage "$W $PREC $POL: launches ${SKIP:-6000}.. timed alone (${COUNT:-500})"
timeout 300 "$NCU" --metrics gpu__time_duration.sum --csv --launch-skip "${SKIP:-6000}" \
  --launch-count "${COUNT:-500}" "${app[@]}" --device cuda --threads 8 --conv-algo "$POL" \
  --precision "$PREC" --conv-algo-cache none --out "$RESULTS/app_${W}.csv" \
  > "$out.csv" 2> "$out.err" || echo "ncu-step: $W FAILED (see $out.err)"
py scripts/report/ncu_step.py summary "$out.csv" | tee "$out.txt" | head -24
gzip -f "$out.csv"
