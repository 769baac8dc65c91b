#!/usr/bin/env bash
# s23 call A (nvidia-h200-x2), main 21fd525: c4b434d's GPU tests, then W5 on two GPUs beside
# PyTorch DDP, the algorithm cache filled before the timed rows (issue 33, item 2).
set -u
export BUNDLE=gpu-bundle-dist23
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
tar xf gpu-bundle-cmd/photos.tar && ls datasets/caltech101-6 | head -3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
FILTER='ConvGpu.Cudnn*:ConvGpu.Choice*:ConvGpu.RunWithTheCache*:Tuning.*' \
  VISIT_RESULTS=$OUT/a1 timeout 120 bash scripts/gpu/visit.sh tests 2>&1 | tail -3
echo "== tests $(el)s"
WORKLOADS=W5 VISIT_RESULTS=$OUT/a2 timeout 440 bash scripts/gpu/visit.sh dist 2>&1 | tail -30
echo "== dist $(el)s"
ls -la $OUT/*
