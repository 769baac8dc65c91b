#!/usr/bin/env bash
# dcgan_study.sh: make dcgan, the DCGAN study's run (SPEC.md W5: batch 64, Adam 2e-4 beta1 0.5,
# 2,944 images = 46 iterations per epoch, 300 epochs) on the shipped colour photos
# (datasets/caltech101-6, 2,600 images: an epoch is then what the set has) or any folder of
# photos (DATA=...). Writes to $OUT (runs/dcgan):
#   <model>_<dataset>.csv (per epoch), <model>_<dataset>_iterations.csv, samples/<dataset>/
#   epoch_NNN.png (the fixed-noise grid of each epoch), progression_<dataset>.png (the grids
#   of epochs 1, 10, 50, 150, 300 that were run, and the last) and plots/ (losses, D(x) and
#   D(G(z)) per iteration and per epoch).
# With a GPU (nvidia-smi lists one, or DEVICE=cuda) the full run. Without, a short CPU run
# (CPU_EPOCHS epochs of CPU_IMAGES images) whose first line says how long the full run would
# take on this CPU (from a few timed iterations) and how to start it (DEVICE=cpu EPOCHS=300).
# Environment: BIN (build/bin), PYTHON, OUT, DATA, DEVICE (auto, cuda, cpu), EPOCHS (300 on a
# GPU; on the CPU the short run unless given), THREADS (all cores), SEED (1), CPU_EPOCHS (5),
# CPU_IMAGES (640), ARGS (more dcgan flags, appended).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-build/bin}
PY=${PYTHON:-/usr/bin/python3}
OUT=${OUT:-runs/dcgan}
DEVICE=${DEVICE:-auto}
THREADS=${THREADS:-$(nproc)}
SEED=${SEED:-1}
CPU_EPOCHS=${CPU_EPOCHS:-5}
CPU_IMAGES=${CPU_IMAGES:-640}
FULL_EPOCHS=300
ARGS=${ARGS:-}
[ -x "$BIN/dcgan" ] || { echo "dcgan_study: no $BIN/dcgan (make build)" >&2; exit 1; }
case "$DEVICE" in
  auto) DEVICE=$(nvidia-smi -L 2>/dev/null | grep -q '^GPU' && echo cuda || echo cpu) ;;
  cpu|cuda) ;;
  *) echo "dcgan_study: DEVICE=$DEVICE: expected auto, cpu or cuda" >&2; exit 2 ;;
esac
if [ -n "${DATA:-}" ]; then
  [ -d "$DATA" ] || { echo "dcgan_study: DATA=$DATA: no such folder" >&2; exit 2; }
  data=(--data "$DATA")
else
  data=(--dataset caltech)
fi
# shellcheck disable=SC2206  # ARGS is a list of flags, split on purpose
common=("${data[@]}" --device "$DEVICE" --threads "$THREADS" --seed "$SEED" $ARGS)

short=0
if [ "$DEVICE" = cpu ] && [ -z "${EPOCHS:-}" ]; then short=1; fi
EPOCHS=${EPOCHS:-$FULL_EPOCHS}

if [ "$short" = 1 ]; then
  # A few timed iterations (the first two are left out of the median) on the whole set: the
  # header gives the set's size, step_ms the time of one iteration.
  probe=$("$BIN/dcgan" "${common[@]}" --images-per-epoch 0 --steps 6 2>&1) || {
    echo "$probe" >&2; exit 1; }
  ms=$(sed -n 's/^step_ms .* median=\([0-9.]*\) .*/\1/p' <<<"$probe")
  n=$(sed -n 's/^dcgan: .*: \([0-9]*\) images, .*/\1/p' <<<"$probe" | head -n1)
  b=$(sed -n 's/^dcgan: .*, batch \([0-9]*\), .*/\1/p' <<<"$probe" | head -n1)
  [ -n "$ms" ] && [ -n "$n" ] && [ -n "$b" ] || {
    echo "$probe" >&2; echo "dcgan_study: could not read the probe's step time" >&2; exit 1; }
  read -r its hours < <(awk -v ms="$ms" -v n="$n" -v b="$b" -v e="$FULL_EPOCHS" 'BEGIN {
    per = n < 2944 ? n : 2944; its = int((per + b - 1) / b);
    printf "%d %.1f\n", its, e * its * ms / 3.6e6 }')
  echo "dcgan: no GPU: a short CPU run ($CPU_EPOCHS epochs of $CPU_IMAGES images); the study's" \
       "$FULL_EPOCHS epochs ($its iterations of $b each) would take about $hours h on this CPU" \
       "($(printf %.0f "$ms") ms per iteration at $THREADS threads): make dcgan DEVICE=cpu EPOCHS=$FULL_EPOCHS"
  run=(--epochs "$CPU_EPOCHS" --images-per-epoch "$CPU_IMAGES")
  EPOCHS=$CPU_EPOCHS
else
  echo "dcgan: the study's run on $DEVICE: $EPOCHS epochs of batch 64 (the PyCUDA study: 9.11 s" \
       "per epoch on an RTX 6000)"
  run=(--epochs "$EPOCHS")
fi

name=$( [ -n "${DATA:-}" ] && basename "$(realpath "$DATA")" || echo caltech101-6)
grids="$OUT/samples/$name"
t0=$(date +%s)
"$BIN/dcgan" "${common[@]}" "${run[@]}" --out "$OUT/dcgan_$name.csv" \
  --iterations-out "$OUT/dcgan_${name}_iterations.csv" --samples-dir "$grids"
secs=$(( $(date +%s) - t0 ))
"$PY" scripts/report/dcgan_progression.py --run "pdnn=$grids" --epochs 1,10,50,150,300 \
  --out "$OUT/progression_$name.png" \
  --title "pdnn DCGAN (W5, batch 64) on $name, $DEVICE: fixed-noise samples, $EPOCHS epochs run"
"$PY" scripts/report/plot.py --results "$OUT" --out "$OUT/plots" | grep wrote || true
echo "dcgan: $EPOCHS epoch(s) in $secs s end to end on $DEVICE; progression $OUT/progression_$name.png," \
     "grids $grids/, curves $OUT/plots/"
