#!/usr/bin/env bash
# Session 15, call 6 (issue 32): 679b30f (= a09ea8e's kernels: the channel-minor copy, the phases'
# pair epilogue, the weights' compile-time loader) against accdc63: W4's bf16 step and passes
# (fwd_bf16_load_w and the epilogue are shared with W4's 3x3 kernels), W5's again; the stall
# reasons of direct_fwd_cm on D.conv2 (forward, backward-data).
# Bundles: gpu-bundle-before = accdc63, gpu-bundle = 679b30f (dcgan bench_conv_gpu caltech101).
# carry ["gpu-bundle","gpu-bundle-before","gpu-bundle-cmd","datasets/caltech-w4sub"]
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
source scripts/gpu/host.sh >/dev/null 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -n1)
mkdir -p $OUT/w5
echo "== ab-steps W4 W5 bf16 $(el)s"
BEFORE=gpu-bundle-before WORKLOADS="W4 W5" PRECISIONS="bf16" POLICIES="own auto" ROUNDS=2 \
  W4_ARGS="--data datasets/caltech-w4sub --images-per-epoch 448" \
  W5_ARGS="--data datasets/caltech-w4sub" W5_IMAGES=960 VISIT_RESULTS=$OUT/v2 \
  timeout 200 scripts/gpu/visit.sh ab-steps 2>&1 | tail -7
echo "== conv-ab W4 $(el)s"
BEFORE=gpu-bundle-before FILTERS="W4" ROUNDS=2 VISIT_RESULTS=$OUT/v3 timeout 120 \
  scripts/gpu/visit.sh conv-ab 2>&1 | grep -E "W4|sum" | head -30
echo "== ncu stalls $(el)s"
for p in "fwd 3" "bd 9"; do set -- $p
  timeout 60 $NCU --target-processes all --kernel-name regex:direct_fwd_cm --launch-skip $2 --launch-count 1 \
    --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum,smsp__cycles_active.avg' \
    $BIN/bench_conv_gpu --filter D.conv2 --algos direct --precisions bf16 --repeat 3 --out $OUT/w5/ncu_run.csv \
    > $OUT/w5/stalls_d2$1.txt 2>&1; echo rc=$?
  grep -E "stalled|inst_executed|cycles_active" $OUT/w5/stalls_d2$1.txt | awk '$NF+0 > 0.05 || /inst|cycles/' | sort -k3 -n -r | head -14
done
tar czf $OUT/w5.tgz -C $OUT w5 && rm -rf $OUT/w5
echo "== end $(el)s"
