#!/usr/bin/env bash
# dcgan_quality.sh: W5's quality beyond the paper (make dcgan-quality). On one data set
# (Fashion-MNIST by default):
#   1. the classifier that judges: pdnn's W3 (build/bin/mnist --model keras) trained once on the
#      real 28x28 images (kept in $OUT/classifier_<dataset>.ckpt; delete it to retrain);
#   2. pdnn's DCGAN, EPOCHS epochs of 2,944 images, and 10,000 samples from it;
#   3. PyTorch's DCGAN with the same recipe, initial weights, data order and noise
#      (scripts/twins/torch_reference.py dcgan), and 10,000 samples from it;
#   4. build/bin/gan_score on both sample sets and on the held-out real images: class entropy,
#      mean confidence, Inception-score and FID analogues -> $OUT/quality_<dataset>.csv;
#   5. the loss curves (scripts/report/plot.py) and one progression PNG of both runs' fixed-noise grids
#      (epochs 1, 10, 50, 150, 300 of those run, and the last; scripts/report/dcgan_progression.py).
# DATASET=caltech (the shipped colour photos, or DATA=any folder of class folders): the study's
# comparison, 3 seeds x 300 epochs of both frameworks scored by the photo judge after epochs
# 50, 150 and 300, with the spread over seeds: scripts/study/dcgan_quality_photos.sh (its header has
# its knobs). Environment of the IDX data sets: BIN (build/bin), PYTHON (/usr/bin/python3), OUT
# (runs/dcgan), DATASET (fashion-mnist or mnist), EPOCHS (5), SEED (1), THREADS (all cores),
# DEVICE (cpu or cuda), CLASSIFIER_EPOCHS (3), SAMPLES (10000), TORCH (1; 0: pdnn alone), DATA
# (the IDX folder), IMAGES_PER_EPOCH (the app's default, 2,944; smaller for a quick look), both
# frameworks.
# Long on a CPU: each DCGAN epoch is 46 iterations of ~1-3 s on 2 cores, PyTorch's slower.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "${DATASET:-}" = caltech ] && exec scripts/study/dcgan_quality_photos.sh
BIN=${BIN:-build/bin}
PY=${PYTHON:-/usr/bin/python3}
OUT=${OUT:-runs/dcgan}
DATASET=${DATASET:-fashion-mnist}
EPOCHS=${EPOCHS:-5}
SEED=${SEED:-1}
THREADS=${THREADS:-$(nproc)}
DEVICE=${DEVICE:-cpu}
CLASSIFIER_EPOCHS=${CLASSIFIER_EPOCHS:-3}
SAMPLES=${SAMPLES:-10000}
TORCH=${TORCH:-1}
ipe=()
[ -n "${IMAGES_PER_EPOCH:-}" ] && ipe=(--images-per-epoch "$IMAGES_PER_EPOCH")
if [ -z "${DATA:-}" ]; then
  if [ "$DATASET" = fashion-mnist ]; then datasets/get_fashion_mnist.sh; DATA=datasets/fashion-mnist
  else datasets/get_mnist.sh; DATA=$([ -d datasets/mnist ] && echo datasets/mnist || echo datasets/mnist-npm10k); fi
fi
[ -d "$DATA" ] || { echo "dcgan_quality: DATA=$DATA: no such folder" >&2; exit 2; }
for b in dcgan gan_score mnist; do
  [ -x "$BIN/$b" ] || { echo "dcgan_quality: no $BIN/$b (make build)" >&2; exit 1; }
done
mkdir -p "$OUT"
name=$(head -n1 "$DATA/NAME" 2>/dev/null || echo "$DATASET")
ck="$OUT/classifier_$name.ckpt"
if [ ! -f "$ck" ]; then
  echo "== classifier: W3 on $name, $CLASSIFIER_EPOCHS epochs"
  "$BIN/mnist" --model keras --dataset "$DATASET" --data "$DATA" --epochs "$CLASSIFIER_EPOCHS" \
    --threads "$THREADS" --device "$DEVICE" --seed "$SEED" --out "$OUT/classifier_$name.csv" \
    --checkpoint "$ck"
fi
echo "== pdnn DCGAN: $EPOCHS epochs on $name ($DEVICE)"
"$BIN/dcgan" --dataset "$DATASET" --data "$DATA" --epochs "$EPOCHS" --seed "$SEED" "${ipe[@]}" \
  --threads "$THREADS" --device "$DEVICE" --out "$OUT/dcgan_$name.csv" \
  --iterations-out "$OUT/dcgan_${name}_iterations.csv" --samples-dir "$OUT/samples/$name" \
  --samples "$SAMPLES" --samples-out "$OUT/samples_${name}_pdnn.idx.gz"
sets=(--set "pdnn=$OUT/samples_${name}_pdnn.idx.gz")
if [ "$TORCH" = 1 ]; then
  echo "== PyTorch DCGAN: the same recipe ($DEVICE)"
  # Without a GPU bundle's LD_LIBRARY_PATH: PyTorch brings its own libraries.
  env -u LD_LIBRARY_PATH OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=1 "$PY" \
    scripts/twins/torch_reference.py dcgan --dataset "$DATASET" --data "$DATA" --epochs "$EPOCHS" "${ipe[@]}" \
    --seed "$SEED" --threads "$THREADS" --device "$DEVICE" --out "$OUT/torch_dcgan_$name.csv" \
    --iterations-out "$OUT/torch_dcgan_${name}_iterations.csv" \
    --samples-dir "$OUT/samples/torch_$name" --samples "$SAMPLES" \
    --samples-out "$OUT/samples_${name}_torch.idx.gz"
  sets+=(--set "torch=$OUT/samples_${name}_torch.idx.gz")
fi
runs=(--run "pdnn=$OUT/samples/$name")
[ "$TORCH" = 1 ] && runs+=(--run "PyTorch=$OUT/samples/torch_$name")
env -u LD_LIBRARY_PATH "$PY" scripts/report/dcgan_progression.py "${runs[@]}" --epochs 1,10,50,150,300 \
  --out "$OUT/progression_${name}_pdnn_torch.png" \
  --title "W5 on $name, $EPOCHS epochs ($DEVICE), seed $SEED: pdnn and PyTorch from the same weights, data order and noise"
echo "== quality scores"
"$BIN/gan_score" --classifier "$ck" --dataset "$DATASET" --data "$DATA" "${sets[@]}" \
  --images "$SAMPLES" --threads "$THREADS" --device "$DEVICE" --out "$OUT/quality_$name.csv"
env -u LD_LIBRARY_PATH "$PY" scripts/report/plot.py --results "$OUT" --out "$OUT/plots" | grep wrote || true
echo "dcgan_quality: grids in $OUT/samples/, scores in $OUT/quality_$name.csv, plots in $OUT/plots"
