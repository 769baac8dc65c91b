#!/usr/bin/env bash
# 17th session, call 4: issue 33 item 3, the memory table in one command on one H200.
# W4 fp32 at 224..1344: pdnn uncapped and under the H100's caps (TABLE_PLAN's default), then
# PyTorch plain / save_on_cpu / checkpoint, each a fresh process under its time limit; cuDNN's
# autotuner off in the twin (PyTorch's own default), one warm-up step.
# The photos: datasets/caltech-w4sub (170 a class; the tree cannot carry all 33 MB beside the
# bundle): the steps' work does not depend on which photos.
# Prepare (at s17 c2f225a; fp32 code = main's): BINS="caltech101" DATA= BUNDLE=/work/main/gpu-bundle-mem scripts/gpu/prepare.sh
# carry ["gpu-bundle-mem","gpu-bundle-cmd","datasets/caltech-w4sub"]
set -u
export BUNDLE=gpu-bundle-mem
rm -rf ~/.cache/pdnn
t0=$(date +%s)
PARTS=table TORCH_CUDNN_BENCHMARK=off TORCH_WARMUP=1 STEPS=20 TORCH_STEPS=3 TORCH_TIMEOUT=90 \
  PDNN_TIMEOUT=120 CALTECH_DATA=datasets/caltech-w4sub VISIT_RESULTS=$OUT/m \
  timeout 560 scripts/gpu/visit.sh memory 2>&1 | grep -v "^epoch" | tail -60
echo "== end $(( $(date +%s) - t0 ))s"
