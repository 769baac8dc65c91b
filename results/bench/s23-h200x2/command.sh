#!/usr/bin/env bash
# s23 call B, main 21fd525: every W4 and W5 convolution pass against its floor (cuBLAS's rate of
# the precision, the copy rate, in the same run), then a W4 bf16 step kernel by kernel (ncu).
set -u
export BUNDLE=gpu-bundle-dist23
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
FILTER=W4 ALGOS=direct,cudnn PRECISIONS=tf32,bf16 REPEAT=10 \
  VISIT_RESULTS=$OUT/b1 timeout 150 bash scripts/gpu/visit.sh conv 2>&1 | tail -2
echo "== conv W4 $(el)s"
FILTER=W5 ALGOS=direct,cudnn,im2col PRECISIONS=tf32,bf16 REPEAT=10 \
  VISIT_RESULTS=$OUT/b2 timeout 120 bash scripts/gpu/visit.sh conv 2>&1 | tail -2
echo "== conv W5 $(el)s"
WORKLOAD=W4 PRECISION=bf16 POLICY=own SKIP=3000 COUNT=400 STEPS=60 \
  VISIT_RESULTS=$OUT/b3 timeout 300 bash scripts/gpu/visit.sh ncu-step 2>&1 | tail -30
echo "== ncu-step W4 $(el)s"
