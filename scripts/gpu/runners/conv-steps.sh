#!/usr/bin/env bash
# conv-steps: the GPU convolution engine's proof at the step level (issue 17): ms per training
# step (CUDA graph) of W3, W4 and W5 for each --conv-algo policy (im2col: the old path; own:
# the best of pdnn's kernels; auto: cuDNN included) in fp32 and TF32 (and bf16: PRECISIONS="fp32
# tf32 bf16", --precision bf16, autocast), then PyTorch 2.x on the
# same workloads in the same command (scripts/twins/torch_gpu_bench.py), and W4's per-layer profile
# under `own`. -> $RESULTS/steps.csv, torch.csv, profile_w4_*.csv, algorithms.tsv, logs.
# Prepare: BINS="caltech101 mnist dcgan" DATA=mnist-npm10k scripts/gpu/prepare.sh
# MNIST_DATA: W3's IDX folder (default the bundle's mnist-npm10k).
# Knobs: POLICIES ("im2col own auto"), PRECISIONS ("fp32 tf32"), WORKLOADS ("W3 W4 W5"), STEPS_W4 (120),
#        TORCH (1), PROFILE (1), PROFILE_PRECISIONS ("fp32 tf32").
set -uo pipefail
source "$(dirname "$0")/../host.sh"
has() { case " $2 " in *" $1 "*) return 0 ;; esac; return 1; }
W=${WORKLOADS:-W3 W4 W5}
has W3 "$W" && { need_bin mnist || exit 1; }
has W4 "$W" && { need_bin caltech101 || exit 1; }
has W5 "$W" && { need_bin dcgan || exit 1; }
link_datasets
cache=$RESULTS/algorithms.tsv
step() {  # name, app args...: one row in steps.csv, the median line on stdout
  local name=$1
  shift
  if timeout 150 "$@" --conv-algo-cache "$cache" --bench-csv "$RESULTS/steps.csv" \
      > "$RESULTS/$name.log" 2>&1; then
    echo "$name: $(grep '^step_ms' "$RESULTS/$name.log" | grep -o 'median=[0-9.]*')"
  else
    echo "$name: FAILED"
    tail -3 "$RESULTS/$name.log"
  fi
}
stage "pdnn steps"
for policy in ${POLICIES:-im2col own auto}; do
  for prec in ${PRECISIONS:-fp32 tf32}; do
    tf=(--precision "$prec")
    has W3 "$W" && step "W3_${policy}_$prec" "$BIN/mnist" --device cuda --model keras --batch 128 \
      --steps 300 --data "${MNIST_DATA:-$BUNDLE/data/mnist-npm10k}" --threads 4 --conv-algo "$policy" "${tf[@]}"
    has W4 "$W" && step "W4_${policy}_$prec" "$BIN/caltech101" --device cuda --steps ${STEPS_W4:-120} --threads 8 \
      --conv-algo "$policy" "${tf[@]}"
    has W5 "$W" && step "W5_${policy}_$prec" "$BIN/dcgan" --device cuda --dataset caltech \
      --images-per-epoch 2560 --steps 100 --threads 8 --conv-algo "$policy" "${tf[@]}"
  done
done
if [ "${PROFILE:-1}" = 1 ] && has W4 "$W"; then
  stage "W4 per-layer profile (own)"
  for prec in ${PROFILE_PRECISIONS:-fp32 tf32}; do
    tf=(--precision "$prec")
    timeout 150 "$BIN/caltech101" --device cuda --steps 12 --threads 8 --conv-algo own "${tf[@]}" \
      --profile --profile-out "$RESULTS/profile_w4_own_$prec.csv" --conv-algo-cache "$cache" \
      > "$RESULTS/profile_w4_own_$prec.log" 2>&1 || echo "profile $prec: FAILED"
  done
fi
if [ "${TORCH:-1}" = 1 ]; then
  stage "PyTorch steps"
  py scripts/twins/torch_gpu_bench.py --workloads "$(echo $W | tr ' ' ',')" --steps 100 \
    --precisions "$(echo ${PRECISIONS:-fp32 tf32} | tr ' ' ',')" \
    --out "$RESULTS/torch.csv" > "$RESULTS/torch.log" 2>&1 || echo "torch: FAILED"
  tail -14 "$RESULTS/torch.log"
fi
