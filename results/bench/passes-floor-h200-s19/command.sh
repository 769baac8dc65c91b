#!/usr/bin/env bash
# 19th session, call P (issue 32): why W4's TF32 direct passes sit far above their floors, at main
# 50645d6 (gpu-bundle-conv: bench_conv_gpu alone). (1) bench_conv_gpu over W4 and W5, direct and
# cuDNN, TF32 and bf16, each pass beside its floor (the cuBLAS GEMM rate of that precision and
# the copy rate, measured in the same run); (2) Nsight Compute on the passes the eighteenth
# session could not explain: conv2's TF32 forward (0.973 ms, ~3x bf16's where ~2x was predicted)
# and conv6's TF32 weight gradient (direct 0.553 against cuDNN 0.354), each beside its bf16 twin.
# carry ["gpu-bundle-conv","gpu-bundle-cmd"]; park results/ and datasets/caltech101-6.
set -u
export BUNDLE=gpu-bundle-conv
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
FILTER=W4 ALGOS=direct,cudnn PRECISIONS=tf32,bf16 REPEAT=10 \
  VISIT_RESULTS=$OUT/v1 timeout 150 scripts/gpu/visit.sh conv 2>&1 | tail -2
echo "== conv W4 $(el)s"
FILTER=W5 ALGOS=direct,cudnn PRECISIONS=tf32,bf16 REPEAT=10 \
  VISIT_RESULTS=$OUT/v2 timeout 100 scripts/gpu/visit.sh conv 2>&1 | tail -2
echo "== conv W5 $(el)s"
PROFILES="c2f_tf32=W4_conv2/direct/tf32/3/direct_fwd c2f_bf16=W4_conv2/direct/bf16/3/direct_fwd c6w_tf32=W4_conv6/direct/tf32/3/direct_bww c6w_bf16=W4_conv6/direct/bf16/3/direct_bww c5w_tf32=W4_conv5/direct/tf32/3/direct_bww" \
  VISIT_RESULTS=$OUT/v3 timeout 300 scripts/gpu/visit.sh ncu-conv 2>&1 | tail -40
echo "== end $(el)s"
