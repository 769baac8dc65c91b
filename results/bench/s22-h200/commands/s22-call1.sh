#!/usr/bin/env bash
# s22 call 1: the GPU tests of branch s22 (TF32 bww two blocks + im2col K4S2), then the passes
# A/B against main (70535d8): W5 im2col bf16/TF32, W4 direct TF32.
set -u
cd "$(dirname "$0")/.."
export BUNDLE=gpu-bundle-s22
FILTER='ConvGpu.Im2col*:ConvGpu.EveryDirectTile*:ConvGpu.Bf16EveryDirectTile*:ConvGpu.EveryAlgorithmAndPass*:ConvGpu.Bf16EveryAlgorithmAndPass*:ConvGpu.ReferenceMatches*:ConvGpuPasses.*' \
  timeout 240 bash scripts/gpu/visit.sh tests
BEFORE=gpu-bundle-main22 FILTERS="W5" ALGOS="im2col" PRECISIONS="bf16 tf32" ROUNDS=2 REPEAT=10 \
  timeout 150 bash scripts/gpu/visit.sh conv-ab
BEFORE=gpu-bundle-main22 FILTERS="W4" ALGOS="direct" PRECISIONS="tf32" ROUNDS=2 REPEAT=10 \
  timeout 120 bash scripts/gpu/visit.sh conv-ab
ls -la "$OUT"
