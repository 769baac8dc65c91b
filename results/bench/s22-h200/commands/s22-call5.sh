#!/usr/bin/env bash
# s22 call 5: the DCGAN's quality in bf16 on seeds 4-6 (issue 32, item 5), pdnn at ba9ceac.
set -u
cd "$(dirname "$0")/.."
export BUNDLE=gpu-bundle-q22
PRECISION=${PRECISION:-bf16} SEEDS="4 5 6" PARTS="pdnn score" timeout 580 bash scripts/gpu/visit.sh dcgan-quality
ls -la "$OUT"
