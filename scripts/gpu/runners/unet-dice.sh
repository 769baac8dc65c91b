#!/usr/bin/env bash
# unet-dice: issue 35's accuracy run, the large-model seed's claim that a segmentation trained on
# the whole image beats one trained on tiles of it. The U-Net of `segment` (base 64, depth 4,
# Adam 1e-3) on datasets/ccp-200 (person vs background; the photos, ~256 x 390 on disk, are
# up-sampled to SIZE, so the sides test the context a tile sees, not finer detail) twice per
# seed, from the same initial weights (the seed's first draws):
#   whole  SIZE x SIZE images, BATCH a step;
#   tiles  the same images cut into (SIZE/TILE)^2 tiles of TILE x TILE (segment --tile), BATCH x
#          (SIZE/TILE)^2 tiles a step: the same pixels a step, the same steps an epoch, EPOCHS
#          each (the same budget). The tiles' scores count every pixel of the test images, so
#          they are the stitched predictions' (data/dataset.h, DatasetTiles).
# Prepare: BINS="segment" DATA= scripts/gpu/prepare.sh (datasets/ccp-200 travels in the tree).
# There: scripts/gpu/visit.sh unet-dice
# -> $RESULTS/runs/pdnn-cuda-<precision>_<whole|tiles>_s<seed>.csv (per epoch: loss, IoU, Dice)
# and logs, overlays of the first seed, and scripts/report/accuracy_summary.py's tables of the
# final test Dice (person, and the mean of both classes) over seeds, per mode (its data set:
# ...-1024px against ...-1024px-tiles256): runs/summary_test_dice_person.csv, ..._mean_dice.csv.
# Knobs: SIZE (1024), TILE (256), EPOCHS (10), SEEDS ("1"), BATCH (1), PRECISION (tf32),
# RUN_TIMEOUT (seconds a run, 280), APP_ARGS (more segment flags, both modes), OVERLAYS (0:
# the first seed's overlays a epoch; 4 overlays at 1024 made the visit's tarball 117 MB, past
# what the device tool brings back, and the per-epoch CSVs were lost with them).
# Estimate (H200, TF32): the U-Net at 1024 x 1024, one image: 1.2 TFLOP forward, ~3.6 a step,
# ~45-55 ms; 151 steps an epoch + 49 test images: ~9 s an epoch, 10 epochs + start ~100 s a
# run, ~3.5 min a seed (both modes). Measured (H200, 732ea40): 89 s whole, 87 s tiles, 10
# epochs: ~3 min a seed.
set -uo pipefail
source "$(dirname "$0")/../host.sh"
need_bin segment || exit 1
SIZE=${SIZE:-1024}
TILE=${TILE:-256}
EPOCHS=${EPOCHS:-10}
SEEDS=${SEEDS:-1}
BATCH=${BATCH:-1}
PRECISION=${PRECISION:-tf32}
[ $((SIZE % TILE)) -eq 0 ] || { echo "unet-dice: TILE=$TILE does not divide SIZE=$SIZE" >&2; exit 2; }
per=$(( (SIZE / TILE) * (SIZE / TILE) ))
stage "the U-Net at $SIZE: whole images (batch $BATCH) against $per tiles of $TILE an image (batch $((BATCH * per))), $EPOCHS epochs, $PRECISION, seeds $SEEDS"
failed=0
mkdir -p "$RESULTS/runs"
for seed in $SEEDS; do
  for mode in whole tiles; do
    args=(--batch "$BATCH")
    [ "$mode" = tiles ] && args=(--tile "$TILE" --batch $((BATCH * per)))
    ov=()
    [ "$seed" = "$(echo $SEEDS | cut -d' ' -f1)" ] && [ "${OVERLAYS:-0}" -gt 0 ] &&
      ov=(--overlays "$OVERLAYS" --overlay-dir "$RESULTS/overlays_$mode")
    [ ${#ov[@]} -eq 0 ] && ov=(--overlays 0)
    run=$RESULTS/runs/pdnn-cuda-${PRECISION}_${mode}_s$seed  # accuracy_summary.py's names
    start=$SECONDS
    timeout "${RUN_TIMEOUT:-280}" "$BIN/segment" --device cuda --data datasets/ccp-200 --size "$SIZE" \
      --epochs "$EPOCHS" --seed "$seed" --precision "$PRECISION" --loader-threads 8 "${args[@]}" \
      "${ov[@]}" --out "$run.csv" ${APP_ARGS:-} > "$run.log" 2>&1
    rc=$?
    echo "$mode seed $seed: rc $rc in $((SECONDS - start)) s; $(grep -m1 '^segment: model' "$run.log" | cut -c1-160)"
    [ $rc -eq 0 ] || failed=1
  done
done
# The final test Dice per mode over the seeds (the modes are two data sets, whole and tiled:
# accuracy_summary.py tabulates each).
py scripts/report/accuracy_summary.py "$RESULTS/runs" --columns test_dice_person,test_mean_dice ||
  failed=1
exit $failed
