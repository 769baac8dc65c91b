#!/usr/bin/env bash
# Session 14, call 1. Bundle: biasred rebased on main (16db19c) + torch_conv_layers bf16,
#   BINS="segment pdnn_tests bench_conv_gpu" DATA= scripts/gpu/prepare.sh
# Issue 32: W5's bf16 direct passes per kernel (ncu durations), three kernels' full sections,
#   the passes beside cuDNN and PyTorch bf16 channels_last. Issues 34/35: the GPU tests of
#   biasred and of the planner's bought workspace; the U-Net 512 b4 TF32 beside PyTorch.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
source scripts/gpu/host.sh >/dev/null 2>&1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -n1)
echo "ncu: $NCU"
echo "== tests $(el)s"
FILTER='ConvGpuPasses.*:ConvGpu.*:Bf16Gpu.*:UNetGpu*:ConvTranspose*:MemoryPlanGpu*:StepGraph*:ConvWorkspaceGpu.*:CudaRuntime.*' \
  VISIT_RESULTS=$OUT/v1 timeout 220 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)|^\[  FAILED|Failure' $OUT/v1/tests/tests.log | head -20
mkdir -p $OUT/w5
echo "== bench W5 direct+cudnn bf16 $(el)s"
timeout 90 $BIN/bench_conv_gpu --filter W5 --algos direct,cudnn --precisions bf16 --repeat 10 \
  --out $OUT/w5/conv_w5_bf16.csv > $OUT/w5/conv_w5_bf16.log 2>&1; echo rc=$?
echo "== torch bf16 W5 $(el)s"
timeout 90 env -u LD_LIBRARY_PATH "$PYTHON" scripts/twins/torch_conv_layers.py --filter W5 --precisions bf16 --repeat 20 \
  --out $OUT/w5/torch_w5_bf16.csv > $OUT/w5/torch_w5_bf16.log 2>&1; echo rc=$?
tail -32 $OUT/w5/torch_w5_bf16.log | cut -c1-80
echo "== ncu durations W5 direct bf16 $(el)s"
timeout 150 $NCU --target-processes all --metrics gpu__time_duration.sum --csv \
  $BIN/bench_conv_gpu --filter W5 --algos direct --precisions bf16 --repeat 3 \
  --out $OUT/w5/ncu_run.csv > $OUT/w5/ncu_durations.csv 2> $OUT/w5/ncu_durations.err; echo rc=$?
wc -l $OUT/w5/ncu_durations.csv
sections=(--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats
          --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section LaunchStats
          --section InstructionStats --section SourceCounters)
for spec in "d3fwd:D.conv3:direct_fwd:3" "d4fwd:D.conv4:direct_fwd_imgs:3" "d2bww:D.conv2:direct_bww:3"; do
  IFS=: read -r name layer kern skip <<< "$spec"
  echo "== ncu $name $(el)s"
  timeout 60 $NCU --target-processes all -k "regex:$kern" --launch-skip $skip --launch-count 1 "${sections[@]}" \
    $BIN/bench_conv_gpu --filter "$layer" --algos direct --precisions bf16 --repeat 3 \
    --out $OUT/w5/ncu_$name.csv > $OUT/w5/ncu_$name.txt 2>&1 || echo "$name FAILED"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Executed Ipc|Grid Size|Block Size" $OUT/w5/ncu_$name.txt | head -14
done
left=$(( 570 - $(el) ))
echo "== U-Net 512 b4 TF32 beside PyTorch $(el)s (limit $left s)"
if [ $left -gt 120 ]; then
  PARTS=speed PRECISIONS="tf32" ROUNDS=1 VISIT_RESULTS=$OUT/v2 \
    timeout $left scripts/gpu/visit.sh segment 2>&1 | tail -8
fi
echo "== end $(el)s"
