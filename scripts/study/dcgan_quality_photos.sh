#!/usr/bin/env bash
# dcgan_quality_photos.sh: W5's sample quality on the photos against the PyTorch twin, at the
# study's scale (make dcgan-quality DATASET=caltech; scripts/study/dcgan_quality.sh hands photos here):
#   1. the judge: the photo judge photo64 of the model zoo, trained once by build/bin/caltech101
#      on the training half of the photos at the DCGAN's 64x64 (centre-cropped, [-1, 1]); for
#      the shipped photos the committed results/dcgan/judge/photo64_caltech101-6.ckpt (its
#      training CSV and confusion matrix beside it), for other folders trained here into
#      $OUT/judge/ unless there already;
#   2. per seed of SEEDS, pdnn's DCGAN and PyTorch's twin (same recipe, initial weights, data
#      order and noise; scripts/twins/torch_reference.py dcgan) for EPOCHS epochs, each writing
#      SAMPLES colour samples after each epoch of SCORE_EPOCHS (the same noise every time);
#      JOBS runs at once (on one GPU they share it: the total is what counts, not a run's time);
#   3. build/bin/gan_score on every sample file of SEEDS (the real test half scored alike: the
#      ceiling, its FID the train-vs-test reference) -> $OUT/quality_<dataset>.csv, the sample
#      files deleted afterwards unless KEEP_SAMPLES=1;
#   4. the table over seeds (scripts/report/dcgan_quality_summary.py: mean, std, min, max of the
#      Inception-score and FID analogues per framework and epoch, pdnn's FID over PyTorch's)
#      -> $OUT/quality_<dataset>_summary.csv, and per seed the progression PNG of both runs'
#      fixed-noise grids (epochs 1, 10, 50, 150, 300) -> $OUT/progression_<dataset>_s<seed>.png.
# PARTS picks the steps ("pdnn torch score summary", all by default), so the work can be split
# over several commands (scripts/gpu/runners/dcgan-quality.sh): the scores go to QUALITY_CSV
# (default $OUT/quality_<dataset>.csv), the summary reads every file named in QUALITY (default
# QUALITY_CSV), and the progressions whatever grids are under GRIDS (default $OUT/samples).
# Without a GPU (and no EPOCHS given): a short CPU run (2 epochs of 128 images, 1 seed, 500
# samples after epochs 1 and 2) that exercises every step and says so first.
# Environment: BIN (build/bin), PYTHON (/usr/bin/python3), OUT (runs/dcgan), DATA (the
# shipped datasets/caltech101-6), CLASSES (the judge's labels: the paper's six for the shipped
# photos, else every class folder), DEVICE (auto, cuda, cpu), THREADS (all cores; per run:
# THREADS / JOBS), SEEDS (1 2 3), EPOCHS (300), SCORE_EPOCHS (50,150,300), SAMPLES (10000),
# IMAGES_PER_EPOCH (0: the whole set, the study's run), JOBS (1), PARTS, TORCH (1; 0: pdnn
# alone), JUDGE (the judge's weights), JUDGE_EPOCHS (40), WORK (where sample files go: $OUT),
# KEEP_SAMPLES (0), GRIDS, QUALITY_CSV, QUALITY, ARGS (more flags for both DCGANs, e.g. --nz 8
# --ngf 4 --ndf 4 --batch 8).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-build/bin}
PY=${PYTHON:-/usr/bin/python3}
OUT=${OUT:-runs/dcgan}
DATA=${DATA:-datasets/caltech101-6}
DEVICE=${DEVICE:-auto}
THREADS=${THREADS:-$(nproc)}
JOBS=${JOBS:-1}
PARTS=${PARTS:-pdnn torch score summary}
TORCH=${TORCH:-1}
JUDGE_EPOCHS=${JUDGE_EPOCHS:-40}
KEEP_SAMPLES=${KEEP_SAMPLES:-0}
ARGS=${ARGS:-}
case "$DEVICE" in
  auto) DEVICE=$(nvidia-smi -L 2>/dev/null | grep -q '^GPU' && echo cuda || echo cpu) ;;
  cpu|cuda) ;;
  *) echo "dcgan_quality: DEVICE=$DEVICE: expected auto, cpu or cuda" >&2; exit 2 ;;
esac
[ -d "$DATA" ] || { echo "dcgan_quality: DATA=$DATA: no such folder" >&2; exit 2; }
for p in $PARTS; do
  case "$p" in pdnn|torch|score|summary) ;;
    *) echo "dcgan_quality: PARTS: unknown part '$p' (pdnn, torch, score, summary)" >&2; exit 2 ;;
  esac
done
has() { [[ " $PARTS " == *" $1 "* ]]; }
[ "$TORCH" = 1 ] || PARTS=${PARTS//torch/}
if [ "$DEVICE" = cpu ] && [ -z "${EPOCHS:-}" ] && { has pdnn || has torch; }; then
  EPOCHS=2 SCORE_EPOCHS=${SCORE_EPOCHS:-1,2} SAMPLES=${SAMPLES:-500}
  IMAGES_PER_EPOCH=${IMAGES_PER_EPOCH:-128} SEEDS=${SEEDS:-1}
  echo "dcgan_quality: no GPU: a short CPU run ($EPOCHS epochs of $IMAGES_PER_EPOCH images, seeds" \
       "$SEEDS, $SAMPLES samples after epochs $SCORE_EPOCHS) through every step; the comparison" \
       "(3 seeds x 300 epochs x 2 frameworks) is for a GPU: make dcgan-quality DATASET=caltech" \
       "DEVICE=cpu EPOCHS=300 starts it here (make dcgan says how long one run takes)"
fi
EPOCHS=${EPOCHS:-300}
SCORE_EPOCHS=${SCORE_EPOCHS:-50,150,300}
SAMPLES=${SAMPLES:-10000}
SEEDS=${SEEDS:-1 2 3}
IMAGES_PER_EPOCH=${IMAGES_PER_EPOCH:-0}

shipped=0
[ "$(realpath "$DATA")" = "$(realpath datasets/caltech101-6)" ] && shipped=1
name=$([ "$shipped" = 1 ] && echo caltech101-6 || basename "$(realpath "$DATA")")
if [ -z "${CLASSES:-}" ]; then
  if [ "$shipped" = 1 ]; then CLASSES=airplanes,Motorbikes,Faces_easy,watch,Leopards,bonsai
  else CLASSES=$(find "$DATA" -mindepth 1 -maxdepth 1 -type d ! -name '.*' -printf '%f\n' |
                 LC_ALL=C sort | paste -sd,); fi
fi
if [ -z "${JUDGE:-}" ]; then
  JUDGE=$([ "$shipped" = 1 ] && echo results/dcgan/judge/photo64_caltech101-6.ckpt ||
          echo "$OUT/judge/photo64_$name.ckpt")
fi
need=()
has pdnn && need+=(dcgan)
has score && need+=(gan_score)
has score && [ ! -f "$JUDGE" ] && need+=(caltech101)
for b in "${need[@]}"; do
  [ -x "$BIN/$b" ] || { echo "dcgan_quality: no $BIN/$b (make build)" >&2; exit 1; }
done
WORK=${WORK:-$OUT}
GRIDS=${GRIDS:-$OUT/samples}
QUALITY_CSV=${QUALITY_CSV:-$OUT/quality_$name.csv}
mkdir -p "$OUT" "$WORK"
per_run=$(( THREADS / JOBS > 0 ? THREADS / JOBS : 1 ))
data=(--data "$DATA")
[ "$shipped" = 1 ] && data=(--dataset caltech)
# shellcheck disable=SC2206  # ARGS is a list of flags, split on purpose
common=("${data[@]}" --epochs "$EPOCHS" --images-per-epoch "$IMAGES_PER_EPOCH" --device "$DEVICE"
        --threads "$per_run" --samples "$SAMPLES" --samples-epochs "$SCORE_EPOCHS" $ARGS)
t0=$(date +%s)
stage() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }

# 1. The judge.
if has score && [ ! -f "$JUDGE" ]; then
  stage "judge: photo64 on $name, $JUDGE_EPOCHS epochs ($DEVICE)"
  "$BIN/caltech101" --model photo64 --size 64 --center-crop on --normalize half --data "$DATA" \
    --classes "$CLASSES" --epochs "$JUDGE_EPOCHS" --threads "$THREADS" --device "$DEVICE" \
    --out "$(dirname "$JUDGE")/photo64_$name.csv" \
    --confusion "$(dirname "$JUDGE")/confusion_photo64_$name.png" --save-weights "$JUDGE"
fi

# 2. The runs: one job per framework and seed, JOBS at a time, each with its own log.
jobs_run=()
pdnn_job() {
  local s=$1
  "$BIN/dcgan" "${common[@]}" --seed "$s" --out "$OUT/dcgan_${name}_s$s.csv" \
    --iterations-out "$OUT/dcgan_${name}_s${s}_iterations.csv" \
    --samples-dir "$GRIDS/${name}_s$s" --samples-out "$WORK/samples_${name}_pdnn_s${s}_e{epoch}.idx"
}
torch_job() {
  local s=$1
  # Without a GPU bundle's LD_LIBRARY_PATH: PyTorch brings its own libraries.
  env -u LD_LIBRARY_PATH OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=1 "$PY" \
    scripts/twins/torch_reference.py dcgan "${common[@]}" --seed "$s" \
    --out "$OUT/torch_dcgan_${name}_s$s.csv" --iterations-out "$OUT/torch_dcgan_${name}_s${s}_iterations.csv" \
    --samples-dir "$GRIDS/torch_${name}_s$s" --samples-out "$WORK/samples_${name}_torch_s${s}_e{epoch}.idx"
}
for s in $SEEDS; do
  has pdnn && jobs_run+=("pdnn $s")
  has torch && jobs_run+=("torch $s")
done
if [ ${#jobs_run[@]} -gt 0 ]; then
  stage "runs: ${jobs_run[*]/%/,} $EPOCHS epochs each on $DEVICE, $JOBS at a time, $per_run threads each"
  pids=() failed=0
  for j in "${jobs_run[@]}"; do
    read -r fw s <<<"$j"
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || failed=1; done
    "${fw}_job" "$s" > "$OUT/${fw}_${name}_s$s.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  for j in "${jobs_run[@]}"; do
    read -r fw s <<<"$j"
    csv=$OUT/dcgan_${name}_s$s.csv
    [ "$fw" = torch ] && csv=$OUT/torch_dcgan_${name}_s$s.csv
    echo "  $fw seed $s: $(grep -E '^epoch [0-9]+/[0-9]+ ' "$OUT/${fw}_${name}_s$s.log" | tail -n1 | cut -c1-110)"
    [ -f "$csv" ] && awk -F, -v fw="$fw" 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == "seconds") c = i }
      NR > 1 { s += $c; n++ } END { if (n) printf "    %d epochs, %.1f s of training (%.3f s per epoch; the PyCUDA study: 9.11 s)\n", n, s, s / n }' "$csv"
    grep -E "rror|WARNING" "$OUT/${fw}_${name}_s$s.log" | tail -n 3 || true
  done
  [ "$failed" = 0 ] || { echo "dcgan_quality: a run failed (logs $OUT/*_${name}_s*.log)" >&2; exit 1; }
fi

# 3. The scores of every sample file of these seeds (both frameworks, whichever are there).
if has score; then
  sets=()
  for s in $SEEDS; do
    for fw in pdnn torch; do
      for e in ${SCORE_EPOCHS//,/ }; do
        f="$WORK/samples_${name}_${fw}_s${s}_e$(printf %03d "$e").idx"
        [ -f "$f" ] && sets+=(--set "$fw-s$s-e$(printf %03d "$e")=$f")
      done
    done
  done
  [ ${#sets[@]} -gt 0 ] || { echo "dcgan_quality: no sample files in $WORK to score" >&2; exit 1; }
  stage "scores: $(( ${#sets[@]} / 2 )) sample set(s) and the real test half, by $JUDGE ($DEVICE)"
  "$BIN/gan_score" --classifier "$JUDGE" --dataset caltech --data "$DATA" --classes "$CLASSES" \
    "${sets[@]}" --images "$SAMPLES" --threads "$THREADS" --device "$DEVICE" \
    --out "$QUALITY_CSV"
  if [ "$KEEP_SAMPLES" != 1 ]; then
    for ((i = 1; i < ${#sets[@]}; i += 2)); do rm -f "${sets[$i]#*=}"; done
  fi
fi

# 4. The table over seeds, and the progressions.
if has summary; then
  stage "summary"
  read -r -a quality <<<"${QUALITY:-$QUALITY_CSV}"
  env -u LD_LIBRARY_PATH "$PY" scripts/report/dcgan_quality_summary.py "${quality[@]}" \
    --out "$OUT/quality_${name}_summary.csv"
  for s in $SEEDS; do
    runs=()
    [ -d "$GRIDS/${name}_s$s" ] && runs+=(--run "pdnn=$GRIDS/${name}_s$s")
    [ -d "$GRIDS/torch_${name}_s$s" ] && runs+=(--run "PyTorch=$GRIDS/torch_${name}_s$s")
    [ ${#runs[@]} -gt 0 ] || continue
    env -u LD_LIBRARY_PATH "$PY" scripts/report/dcgan_progression.py "${runs[@]}" --epochs 1,10,50,150,300 \
      --out "$OUT/progression_${name}_s$s.png" \
      --title "W5 on $name, seed $s: pdnn and PyTorch from the same weights, data order and noise"
  done
fi
stage "done ($PARTS): in $OUT"
