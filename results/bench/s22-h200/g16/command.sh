#!/usr/bin/env bash
# s22: branch bww-g16 (07efd07: fp32/TF32 weight gradient's g copied 16 bytes at a time) against
# 3092071 (the same kernels otherwise): the direct tile tests, then W4's direct TF32 and fp32
# passes, 2 rounds alternating.
set -u
cd "$(dirname "$0")/.."
export BUNDLE=gpu-bundle-g16
FILTER='ConvGpu.EveryDirectTile*:ConvGpuPasses.EveryMixOfAlgorithmsThroughTheLayers' timeout 120 bash scripts/gpu/visit.sh tests
BEFORE=gpu-bundle-s22bin FILTERS="W4" ALGOS="direct" PRECISIONS="tf32,fp32" ROUNDS=2 REPEAT=10 \
  timeout 150 bash scripts/gpu/visit.sh conv-ab
ls -la "$OUT"
