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
# PRECISION (fp32; bf16 or tf32 on a GPU, issue 32) is pdnn's --precision (tf32 also the twin's
# --tf32; the twin has no bf16, so PRECISION=bf16 takes PARTS without torch). Its runs and files
# carry it when it is not fp32, so that they sit beside fp32's in one folder: sets
# pdnn-bf16-s<seed>-e<epoch>, dcgan_<dataset>_bf16_s<seed>.csv, logs pdnn-bf16_<dataset>_s<seed>.log,
# grids <dataset>_bf16_s<seed>, quality_<dataset>_bf16_summary.csv (with pdnn-bf16's FID over
# pdnn's fp32 per epoch, when QUALITY holds both), progression_<dataset>_bf16_s<seed>.png (pdnn
# fp32's grids too where GRIDS has them). The summary also draws curves_<dataset>[_bf16].png:
# the per-epoch losses and D outputs over seeds of pdnn fp32, pdnn at PRECISION and PyTorch, from
# the per-run CSVs found in RUNS (folders, default $OUT).
# Without a GPU (and no EPOCHS given): a short CPU run (2 epochs of 128 images, 1 seed, 500
# samples after epochs 1 and 2) that exercises every step and says so first.
# Environment: BIN (build/bin), PYTHON (/usr/bin/python3), OUT (runs/dcgan), DATA (the
# shipped datasets/caltech101-6), CLASSES (the judge's labels: the paper's six for the shipped
# photos, else every class folder), DEVICE (auto, cuda, cpu), THREADS (all cores; per run:
# THREADS / JOBS), SEEDS (1 2 3), EPOCHS (300), SCORE_EPOCHS (50,150,300), SAMPLES (10000),
# IMAGES_PER_EPOCH (0: the whole set, the study's run), JOBS (1), PARTS, TORCH (1; 0: pdnn
# alone), JUDGE (the judge's weights), JUDGE_EPOCHS (40), WORK (where sample files go: $OUT),
# KEEP_SAMPLES (0), GRIDS, QUALITY_CSV, QUALITY, PRECISION, RUNS, ARGS (more flags for both
# DCGANs, e.g. --nz 8 --ngf 4 --ndf 4 --batch 8).
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
PRECISION=${PRECISION:-fp32}
case "$PRECISION" in
  fp32|tf32|bf16) ;;
  *) echo "dcgan_quality: PRECISION=$PRECISION: expected fp32, tf32 or bf16" >&2; exit 2 ;;
esac
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
if [ "$PRECISION" != fp32 ] && [ "$DEVICE" = cpu ] && { has pdnn || has torch; }; then
  echo "dcgan_quality: PRECISION=$PRECISION: the CPU runs fp32 (bf16 and tf32 are for DEVICE=cuda)" >&2
  exit 2
fi
if [ "$PRECISION" = bf16 ] && has torch; then
  echo "dcgan_quality: PRECISION=bf16: the PyTorch twin's dcgan mode has no bf16: PARTS without" \
       "torch (pdnn's bf16 is summarised beside pdnn's and PyTorch's fp32 scores through QUALITY)" >&2
  exit 2
fi
# The runs' names at PRECISION: "-bf16" in labels (pdnn-bf16, the scored sets
# pdnn-bf16-s1-e300), "_bf16" in file names; nothing for fp32 (the names of the earlier runs).
ptag=$([ "$PRECISION" = fp32 ] || echo "-$PRECISION")
ftag=${ptag/-/_}
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
torch_precision=()
[ "$PRECISION" = tf32 ] && torch_precision=(--tf32)
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
  "$BIN/dcgan" "${common[@]}" --precision "$PRECISION" --seed "$s" \
    --out "$OUT/dcgan_${name}${ftag}_s$s.csv" \
    --iterations-out "$OUT/dcgan_${name}${ftag}_s${s}_iterations.csv" \
    --samples-dir "$GRIDS/${name}${ftag}_s$s" \
    --samples-out "$WORK/samples_${name}_pdnn${ptag}_s${s}_e{epoch}.idx"
}
torch_job() {
  local s=$1
  # Without a GPU bundle's LD_LIBRARY_PATH: PyTorch brings its own libraries.
  env -u LD_LIBRARY_PATH OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=1 "$PY" \
    scripts/twins/torch_reference.py dcgan "${common[@]}" "${torch_precision[@]}" --seed "$s" \
    --out "$OUT/torch_dcgan_${name}${ftag}_s$s.csv" \
    --iterations-out "$OUT/torch_dcgan_${name}${ftag}_s${s}_iterations.csv" \
    --samples-dir "$GRIDS/torch_${name}${ftag}_s$s" \
    --samples-out "$WORK/samples_${name}_torch${ptag}_s${s}_e{epoch}.idx"
}
for s in $SEEDS; do
  has pdnn && jobs_run+=("pdnn $s")
  has torch && jobs_run+=("torch $s")
done
if [ ${#jobs_run[@]} -gt 0 ]; then
  stage "runs: ${jobs_run[*]/%/,} $EPOCHS epochs each on $DEVICE ($PRECISION), $JOBS at a time, $per_run threads each"
  pids=() failed=0
  for j in "${jobs_run[@]}"; do
    read -r fw s <<<"$j"
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || failed=1; done
    "${fw}_job" "$s" > "$OUT/${fw}${ptag}_${name}_s$s.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  for j in "${jobs_run[@]}"; do
    read -r fw s <<<"$j"
    csv=$OUT/dcgan_${name}${ftag}_s$s.csv
    [ "$fw" = torch ] && csv=$OUT/torch_dcgan_${name}${ftag}_s$s.csv
    echo "  $fw$ptag seed $s: $(grep -E '^epoch [0-9]+/[0-9]+ ' "$OUT/${fw}${ptag}_${name}_s$s.log" | tail -n1 | cut -c1-110)"
    # a CSV reader, not awk -F,: the gpu column is quoted and holds commas
    [ -f "$csv" ] && env -u LD_LIBRARY_PATH "$PY" - "$csv" <<'PYEOF'
import csv, sys
s = [float(r["seconds"]) for r in csv.DictReader(open(sys.argv[1])) if r.get("seconds")]
if s:
    print("    %d epochs, %.1f s of training (%.3f s per epoch; the PyCUDA study: 9.11 s)"
          % (len(s), sum(s), sum(s) / len(s)))
PYEOF
    grep -E "rror|WARNING" "$OUT/${fw}${ptag}_${name}_s$s.log" | tail -n 3 || true
  done
  [ "$failed" = 0 ] || { echo "dcgan_quality: a run failed (logs $OUT/*_${name}_s*.log)" >&2; exit 1; }
fi

# 3. The scores of every sample file of these seeds (both frameworks, whichever are there).
if has score; then
  sets=()
  for s in $SEEDS; do
    for fw in pdnn$ptag torch$ptag; do
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
  # QUALITY and RUNS: lists split on blanks and newlines (read -d '' ends at EOF, status 1).
  read -r -d '' -a quality <<<"${QUALITY:-$QUALITY_CSV}" || true
  env -u LD_LIBRARY_PATH "$PY" scripts/report/dcgan_quality_summary.py "${quality[@]}" \
    --out "$OUT/quality_${name}${ftag}_summary.csv"
  # The series of the progressions and curves: label, grid folder and epoch-CSV name, for pdnn
  # (fp32 and PRECISION's) and PyTorch (fp32, or tf32 when PRECISION is).
  labels=(pdnn) grids=("$name") csvs=("dcgan_$name")
  if [ "$PRECISION" != fp32 ]; then
    labels=("pdnn fp32" "pdnn $PRECISION") grids+=("$name$ftag") csvs+=("dcgan_$name$ftag")
  fi
  tt=""
  [ "$PRECISION" = tf32 ] && tt=$ftag
  labels+=("PyTorch${tt:+ tf32}") grids+=("torch_$name$tt") csvs+=("torch_dcgan_$name$tt")
  for s in $SEEDS; do
    runs=()
    for i in "${!labels[@]}"; do
      [ -d "$GRIDS/${grids[$i]}_s$s" ] && runs+=(--run "${labels[$i]}=$GRIDS/${grids[$i]}_s$s")
    done
    [ ${#runs[@]} -gt 0 ] || continue
    env -u LD_LIBRARY_PATH "$PY" scripts/report/dcgan_progression.py "${runs[@]}" --epochs 1,10,50,150,300 \
      --out "$OUT/progression_${name}${ftag}_s$s.png" \
      --title "W5 on $name, seed $s: pdnn and PyTorch from the same weights, data order and noise"
  done
  read -r -d '' -a run_dirs <<<"${RUNS:-$OUT}" || true
  curves=()
  for i in "${!labels[@]}"; do
    files=()
    for s in $SEEDS; do
      for d in "${run_dirs[@]}"; do
        [ -f "$d/${csvs[$i]}_s$s.csv" ] && { files+=("$d/${csvs[$i]}_s$s.csv"); break; }
      done
    done
    [ ${#files[@]} -gt 0 ] && curves+=(--run "${labels[$i]}=$(IFS=,; echo "${files[*]}")")
  done
  if [ ${#curves[@]} -gt 0 ]; then
    env -u LD_LIBRARY_PATH "$PY" scripts/report/dcgan_curves.py "${curves[@]}" \
      --out "$OUT/curves_${name}${ftag}.png" \
      --title "W5 on $name: training curves over seeds $SEEDS (per seed the same initial weights, data order and noise)"
  fi
fi
stage "done ($PARTS): in $OUT"
