#!/usr/bin/env bash
# 20th session (issue 32, item 5): W4's 30-epoch accuracy, more seeds. (1) PyTorch 2.11 autocast
# bf16 + channels_last on seeds 4-8, which pdnn ran in bf16 and fp32 (accuracy-bf16-h200: pdnn
# fp32 died on 6 and 7, bf16 spiked on 1); (2) pdnn bf16 and fp32 on new seeds 9-11. Estimates
# on an H200 (that folder): ~45 s a PyTorch run, ~35 s a pdnn run: ~225 + ~210 s.
# Bundle: gpu-bundle-s20acc (caltech101 at main 9f1e073; check REVISION);
# carry ["gpu-bundle-s20acc","gpu-bundle-cmd"]; the photos (datasets/caltech101-6) travel in the
# tree; park results/ and datasets/ccp-200.
set -u
export BUNDLE=gpu-bundle-s20acc
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
PRECISION=bf16 PARTS=accuracy SEEDS="4 5 6 7 8" PDNN_ACC=0 \
  VISIT_RESULTS=$OUT/t timeout 290 scripts/gpu/visit.sh caltech 2>&1 | grep -v '^epoch' | tail -12
echo "== torch $(el)s"
PRECISION="fp32 bf16" PARTS=accuracy SEEDS="9 10 11" TORCH_ACC=0 \
  VISIT_RESULTS=$OUT/p timeout $(( 560 - $(el) )) scripts/gpu/visit.sh caltech 2>&1 | grep -v '^epoch' | tail -12
echo "== end $(el)s"
