#!/usr/bin/env bash
# segment: the U-Net's GPU targets of issue 34, pdnn beside its PyTorch twin
# (scripts/twins/torch_reference.py segment: the same network, initial weights, loss, optimizer,
# split, data order and augmentation) in the same command.
# Prepare (datasets/ccp-200, 6.7 MB, travels with the working tree):
#   BINS="segment" DATA= scripts/gpu/prepare.sh
# Then, through the device tool with carry ["gpu-bundle"]: scripts/gpu/visit.sh segment
# PARTS ("speed accuracy" by default; about 6.5 minutes on an H100 by the estimate below):
#   speed     ms per training step at SPEED_SIZE 512 x 512, batch 4, base 64, depth 4 (the
#             paper's U-Net), uncapped (no memory limit), as one CUDA graph: pdnn
#             (segment --steps, the batch packed and copied from pinned memory every step) and
#             the twin (--steps --mode graph: torch_gpu_bench.py's clock, random batches already
#             on the device) alternating, precision by precision (fp32: TF32 off in both; tf32;
#             bf16: pdnn --precision bf16, PyTorch autocast bfloat16 + channels_last;
#             fp32+transforms: pdnn fp32 with --conv-transforms, cuDNN's FFT and Winograd
#             competing as in PyTorch's fp32, beside the twin's fp32), ROUNDS
#             times -> $RESULTS/steps.csv (pdnn's --bench-csv columns, both frameworks), logs,
#             and the table of medians with pdnn / PyTorch.
#   accuracy  seeds SEEDS x (pdnn, then the twin) on DATA at the GPU study's settings (make
#             segment with a GPU: base 64, depth 4, batch 4, Adam 1e-3, fp32, EPOCHS 30) except the
#             side, SIZE 128 instead of 256 so that the runner fits its visit -> $RESULTS/accuracy/
#             {pdnn,torch}-cuda_unet_s<seed>.csv, pdnn's overlays (first seed), logs, and the
#             twin's scores of pdnn's final weights (the metric on the same predictions, to
#             compare with pdnn's last row); then the tables of the
#             final test Dice (person, and the mean over both classes) over seeds: mean, sample
#             std, per seed, pdnn - PyTorch in points, and each framework's seconds per epoch
#             (scripts/report/accuracy_summary.py --columns), the plots. SIZE=256 is the study
#             itself (PARTS=accuracy alone: about 7 minutes by the same estimate).
# Estimate (H100 SXM: 67 TFLOPS fp32, 495 TF32 and 990 bf16 dense). The U-Net at 512 x 512:
# 385.7 GFLOP forward per image (segment's model summary), 1.54 TFLOP per batch of 4, a training
# step about 3x: 4.6 TFLOP -> ~140 ms at half of fp32's peak, ~30 ms in TF32, ~20 ms in bf16
# (the activations, ~0.27 GB per 64-channel map of the batch at full size, cap the tensor-core
# rates). speed: each run also decodes the photos (pdnn at 512: 10 s on one core here, ~1 s on
# 16), starts CUDA and cuDNN, and runs STEPS (80; the twin 20 more, its warm-up): ~18/10/9 s
# for pdnn and ~20/9/8 s for the twin (import and graph capture included) -> ~75 s a round,
# ROUNDS=2: ~2.5 min. pdnn's --steps spans epochs (38 steps, the last of 3 images, whose block
# its statistics leave out), so 80 steps give it 5-6 timed blocks of 10, the twin 8.
# accuracy at 128 px: 1/16 of the FLOPs, 0.29 TFLOP a step, ~12 ms; 38 steps an epoch + the 49
# test photos + 4 overlays: ~0.7 s an epoch, 30 epochs + start: ~25 s for pdnn; the twin ~40 s
# (Python's batch assembly, pdnn's 31 M initial weights regenerated in numpy: ~2 s) -> ~65 s a
# seed, ~3.3 min. Both parts with the bundle's unpacking: ~6-6.5 minutes.
# Knobs: PARTS, DATA (datasets/ccp-200), SPEED_SIZE (512), STEPS (80), PRECISIONS ("fp32 tf32
# bf16"; also fp32+transforms), ROUNDS (2), SEEDS ("1 2 3"), EPOCHS (30), SIZE (128), BASE (64), DEPTH (4), BATCH (4),
# THREADS (8), PDNN_ARGS and TWIN_ARGS (more flags for the accuracy runs of each side, e.g.
# PDNN_ARGS="--conv-algo cudnn" TWIN_ARGS="--cudnn deterministic"),
# OVERLAYS (1: test images drawn per epoch, first seed only; 4 for every seed made
# a tarball over the device tool's return limit), TORCH (1; 0 leaves the twin out), PDNN (1; 0
# leaves pdnn out: the twin draws pdnn's initial weights itself, so seeds a visit cut short can
# be finished alone). Seeds: from the same initial weights the two runs part beyond rounding
# within about 100 Adam steps (results/README.md), so each seed is one draw per framework:
# SEEDS="1 2 3 4 5" (PARTS=accuracy: ~75 s a seed with the scoring, ~6.5 min) narrows it.
set -uo pipefail
source "$(dirname "$0")/../host.sh"
PARTS=${PARTS:-speed accuracy}
DATA=${DATA:-datasets/ccp-200}
SPEED_SIZE=${SPEED_SIZE:-512}
STEPS=${STEPS:-80}
PRECISIONS=${PRECISIONS:-fp32 tf32 bf16}
ROUNDS=${ROUNDS:-2}
SEEDS=${SEEDS:-1 2 3}
EPOCHS=${EPOCHS:-30}
SIZE=${SIZE:-128}
NET=(--base "${BASE:-64}" --depth "${DEPTH:-4}" --batch "${BATCH:-4}" --threads "${THREADS:-8}")
OVERLAYS=${OVERLAYS:-1}
ACC=$RESULTS/accuracy
# pdnn's final weights for the twin to score (124 MB a seed at base 64: not in the tarball).
WEIGHTS=${TMPDIR:-/tmp}/segment-weights
for part in $PARTS; do
  case $part in speed|accuracy) ;; *) echo "segment: unknown part $part (speed, accuracy)" >&2; exit 2 ;; esac
done
has() { [[ " $PARTS " == *" $1 "* ]]; }
[ "${PDNN:-1}" = 1 ] && { need_bin segment || exit 1; }
[ -d "$DATA" ] || { echo "segment: no $DATA" >&2; exit 1; }
mkdir -p "$ACC" "$WEIGHTS"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
py -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' ||
  echo "segment: no torch for $PYTHON: the twin's runs will fail" >&2
# The twin as a command (timeout runs it): python without the bundle's libraries, as py.
TWIN=(env -u LD_LIBRARY_PATH "$PYTHON" scripts/twins/torch_reference.py segment --device cuda
      --data "$DATA" "${NET[@]}")
# run NAME COMMAND...: the command's output in NAME.log, its step_ms median (or FAILED) printed.
run() {
  local name=$1
  shift
  if timeout 200 "$@" > "$RESULTS/$name.log" 2>&1; then
    echo "$name: $(grep '^step_ms' "$RESULTS/$name.log" | grep -o 'median=[0-9.]*')"
  else
    echo "$name: FAILED"
    tail -3 "$RESULTS/$name.log"
  fi
}

if has speed; then
  stage "speed: ${SPEED_SIZE}x$SPEED_SIZE, $STEPS steps, pdnn and PyTorch alternating, $ROUNDS rounds (about $((ROUNDS * 75 / 60 + 1)) minutes)"
  for round in $(seq "$ROUNDS"); do
    twin_ran=" "
    for prec in $PRECISIONS; do
      base=${prec%+transforms} more=()
      [ "$base" != "$prec" ] && more=(--conv-transforms)
      [ "${PDNN:-1}" = 1 ] && run "speed_pdnn_${prec}_r$round" "$BIN/segment" --device cuda \
        --data "$DATA" --size "$SPEED_SIZE" "${NET[@]}" --steps "$STEPS" --precision "$base" \
        "${more[@]}" --overlays 0 --bench-csv "$RESULTS/steps.csv"
      # The twin has one fp32: it runs once a round for fp32 and fp32+transforms.
      case "$twin_ran" in *" $base "*) continue ;; esac
      twin_ran="$twin_ran$base "
      [ "${TORCH:-1}" = 1 ] && run "speed_torch_${base}_r$round" "${TWIN[@]}" --size "$SPEED_SIZE" \
        --steps "$STEPS" --precision "$base" --mode graph --bench-csv "$RESULTS/steps.csv"
    done
  done
  py - "$RESULTS/steps.csv" <<'EOF'
import csv, os, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]))) if os.path.exists(sys.argv[1]) else []
med = {}
for r in rows:
    med.setdefault((r["precision"], r["app"]), []).append(float(r["median_ms"]))
print(f"{'precision':<15} {'pdnn ms':>9} {'torch ms':>9} {'pdnn/torch':>10}  (median over rounds of each run's median, CUDA graph)")
for prec in dict.fromkeys(p for p, _ in med):
    if (prec, "pdnn") not in med: continue
    # pdnn's fp32+transforms against the twin's fp32 (the arithmetic PyTorch's fp32 allows)
    twin = (prec.split("+")[0], "torch")
    p, t = (statistics.median(med[k]) if k in med else float("nan") for k in ((prec, "pdnn"), twin))
    print(f"{prec:<15} {p:>9.2f} {t:>9.2f} {p / t:>10.3f}")
EOF
fi

if has accuracy; then
  stage "accuracy: $EPOCHS epochs at ${SIZE}x$SIZE x seeds $SEEDS, pdnn then PyTorch (about 3.5 minutes at 128)"
  for s in $SEEDS; do
    if [ "${PDNN:-1}" = 1 ]; then
      rm -f "$ACC/pdnn-cuda_unet_s$s.csv" "$WEIGHTS/pdnn_s$s.ckpt"
      # Overlays for the first seed only: 90 epochs of them made the tarball too large to return.
      timeout 300 "$BIN/segment" --device cuda --data "$DATA" --size "$SIZE" "${NET[@]}" \
        --epochs "$EPOCHS" --seed "$s" --out "$ACC/pdnn-cuda_unet_s$s.csv" \
        --overlays "$([ "$s" = "${SEEDS%% *}" ] && echo "$OVERLAYS" || echo 0)" \
        --overlay-dir "$ACC/overlays_pdnn_s$s" --save-weights "$WEIGHTS/pdnn_s$s.ckpt" ${PDNN_ARGS:-} \
        > "$RESULTS/accuracy_pdnn_s$s.log" 2>&1 ||
        echo "segment: pdnn seed $s failed (see $RESULTS/accuracy_pdnn_s$s.log)"
      grep -E "^epoch $EPOCHS/$EPOCHS  " "$RESULTS/accuracy_pdnn_s$s.log" | grep -v '  batch ' | cut -c1-200
      stage "pdnn seed $s done"
    fi
    if [ "${TORCH:-1}" = 1 ]; then
      rm -f "$ACC/torch-cuda_unet_s$s.csv"
      timeout 300 "${TWIN[@]}" --size "$SIZE" --epochs "$EPOCHS" --seed "$s" ${TWIN_ARGS:-} \
        --out "$ACC/torch-cuda_unet_s$s.csv" > "$RESULTS/accuracy_torch_s$s.log" 2>&1 ||
        echo "segment: PyTorch seed $s failed (see $RESULTS/accuracy_torch_s$s.log)"
      grep -E "^epoch $EPOCHS/$EPOCHS  " "$RESULTS/accuracy_torch_s$s.log" | cut -c1-200
      grep -o "decoded to .*" "$RESULTS/accuracy_torch_s$s.log" | head -1 | sed 's/^/torch /'
      stage "PyTorch seed $s done"
      # The metric on the same predictions: the twin scores pdnn's final weights; its numbers
      # are pdnn's final row's up to the forward's rounding (a pixel or two of Dice).
      if [ -f "$WEIGHTS/pdnn_s$s.ckpt" ]; then
        # TWIN_ARGS: the same network (--batchnorm on: its buffers are in the checkpoint).
        timeout 120 "${TWIN[@]}" --size "$SIZE" --seed "$s" --epochs 0 ${TWIN_ARGS:-} \
          --eval-checkpoint "$WEIGHTS/pdnn_s$s.ckpt" > "$RESULTS/accuracy_torch_eval_pdnn_s$s.log" 2>&1 ||
          echo "segment: PyTorch scoring pdnn's seed $s failed (see $RESULTS/accuracy_torch_eval_pdnn_s$s.log)"
        grep "^eval " "$RESULTS/accuracy_torch_eval_pdnn_s$s.log" | sed 's/^eval [^:]*:/torch scoring pdnn'"'"'s final weights:/' | cut -c1-240
      fi
    fi
    rm -f "$WEIGHTS/pdnn_s$s.ckpt"
  done
  py scripts/report/accuracy_summary.py "$ACC" --columns test_dice_person,test_mean_dice
  py scripts/report/plot.py --results "$ACC" --out "$ACC/plots" || echo "segment: no plots"
fi
stage "done; logs in $RESULTS"
