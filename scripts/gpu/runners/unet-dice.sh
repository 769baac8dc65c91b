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
# -> $RESULTS/dice_<whole|tiles>_s<seed>.csv (per epoch: loss, IoU, Dice), logs, overlays of the
# first seed, dice_summary.csv and the printed table: the final test Dice (person, and the mean of
# both classes) per run, and per mode over seeds.
# Knobs: SIZE (1024), TILE (256), EPOCHS (10), SEEDS ("1"), BATCH (1), PRECISION (tf32),
# RUN_TIMEOUT (seconds a run, 280), APP_ARGS (more segment flags, both modes).
# Estimate (H200, TF32): the U-Net at 1024 x 1024, one image: 1.2 TFLOP forward, ~3.6 a step,
# ~45-55 ms; 151 steps an epoch + 49 test images: ~9 s an epoch, 10 epochs + start ~100 s a
# run, ~3.5 min a seed (both modes).
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
for seed in $SEEDS; do
  for mode in whole tiles; do
    args=(--batch "$BATCH")
    [ "$mode" = tiles ] && args=(--tile "$TILE" --batch $((BATCH * per)))
    ov=()
    [ "$seed" = "$(echo $SEEDS | cut -d' ' -f1)" ] && ov=(--overlays 4 --overlay-dir "$RESULTS/overlays_$mode")
    [ ${#ov[@]} -eq 0 ] && ov=(--overlays 0)
    log=$RESULTS/dice_${mode}_s$seed.log
    start=$SECONDS
    timeout "${RUN_TIMEOUT:-280}" "$BIN/segment" --device cuda --data datasets/ccp-200 --size "$SIZE" \
      --epochs "$EPOCHS" --seed "$seed" --precision "$PRECISION" --loader-threads 8 "${args[@]}" \
      "${ov[@]}" --out "$RESULTS/dice_${mode}_s$seed.csv" ${APP_ARGS:-} > "$log" 2>&1
    rc=$?
    echo "$mode seed $seed: rc $rc in $((SECONDS - start)) s; $(grep -m1 '^segment: model' "$log" | cut -c1-160)"
    [ $rc -eq 0 ] || failed=1
  done
done
py - "$RESULTS" <<'EOF'
import csv, glob, os, re, statistics, sys
out = sys.argv[1]
rows = []
for path in sorted(glob.glob(os.path.join(out, "dice_*_s*.csv"))):
    m = re.match(r"dice_(whole|tiles)_s(\d+)\.csv", os.path.basename(path))
    with open(path) as f:
        r = list(csv.DictReader(f))
    if not m or not r:
        continue
    last = r[-1]
    rows.append({"mode": m.group(1), "seed": m.group(2), "epochs": last["epoch"],
                 "dataset": last["dataset"], "test_dice_person": last["test_dice_person"],
                 "test_mean_dice": last["test_mean_dice"], "seconds": last["seconds"]})
with open(os.path.join(out, "dice_summary.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=["mode", "seed", "epochs", "dataset", "test_dice_person",
                                      "test_mean_dice", "seconds"])
    w.writeheader()
    w.writerows(rows)
print("| mode | seed | epochs | data set | test Dice person | mean Dice |")
print("|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['mode']} | {r['seed']} | {r['epochs']} | {r['dataset']} | "
          f"{100 * float(r['test_dice_person']):.2f} | {100 * float(r['test_mean_dice']):.2f} |")
for mode in ("whole", "tiles"):
    v = [100 * float(r["test_dice_person"]) for r in rows if r["mode"] == mode]
    if v:
        sd = statistics.stdev(v) if len(v) > 1 else float("nan")
        print(f"{mode}: person Dice {statistics.mean(v):.2f} +- {sd:.2f} over {len(v)} seed(s)")
EOF
exit $failed
