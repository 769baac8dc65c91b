#!/usr/bin/env bash
# 20th session (issue 33, item 3): the memory table in one command, with branch chooser-reuse
# (465f61a: chooser-reps3's early ends of the algorithm timing + a planned run taking the
# unplanned choice of a shape where it is pdnn's own and fits, instead of timing it again).
# W4 fp32 at 224..1344: pdnn uncapped and under TABLE_PLAN's default caps, then PyTorch plain /
# save_on_cpu / checkpoint, each a fresh process under its time limit; cuDNN's autotuner off in
# the twin (PyTorch's default), one warm-up step, 2 timed; pdnn 16 steps, 448 images an epoch
# (whole batches: a block after the first is timed).
# The seventeenth session's try took ~820 s in all (pdnn 402 s, of it 274 s of first blocks;
# PyTorch ~420 s with save_on_cpu killed at 1120 after ~105 s). Predicted here: pdnn ~230-280 s,
# PyTorch ~350-400 s (TORCH_TIMEOUT 60 ends save_on_cpu at 1120 sooner): ~600 s, so it may still
# not fit 560; the table says what ran.
# Bundle: gpu-bundle-reuse (caltech101 pdnn_tests at 465f61a; check REVISION);
# carry ["gpu-bundle-reuse","gpu-bundle-cmd","datasets/caltech-w4sub"];
# park results/, datasets/caltech101-6 and datasets/ccp-200.
set -u
export BUNDLE=gpu-bundle-reuse
rm -rf ~/.cache/pdnn
t0=$(date +%s)
PARTS=table TORCH_CUDNN_BENCHMARK=off TORCH_WARMUP=1 STEPS=16 TORCH_STEPS=2 TORCH_TIMEOUT=60 \
  PDNN_TIMEOUT=120 CALTECH_DATA=datasets/caltech-w4sub APP_ARGS="--images-per-epoch 448" \
  VISIT_RESULTS=$OUT/m timeout 570 scripts/gpu/visit.sh memory 2>&1 | grep -v "^epoch" | tail -60
echo "== end $(( $(date +%s) - t0 ))s"
