#!/usr/bin/env bash
# ncu-conv: Nsight Compute's view of chosen implicit-GEMM convolution launches (issue 25's
# per-kernel analysis: throughput against the SM's ceilings, occupancy, warp stall reasons,
# shared-memory bank conflicts, pipe use) -> $RESULTS/<name>.txt, one per profile.
# Prepare: BINS="bench_conv_gpu" DATA= scripts/gpu/prepare.sh
# Knobs: PROFILES: space-separated NAME=LAYER/ALGO/PRECISION/SKIP[/KERNEL] items (KERNEL: a
#   regex of the kernel's name, default igemm; the direct kernels are direct_fwd, which runs the
#   forward and backward-data, and direct_bww), e.g.
#   "w4c2_fwd=W4_conv2/implicit:32x256/fp32/3" (_ for a space): the launch after SKIP launches of kernels named
#   igemm while bench_conv_gpu runs LAYER with ALGO in PRECISION (3 warm-up and 3 timed calls a
#   pass: SKIP 3 is the forward's fourth call, 9 the backward-weights' fourth when the pass
#   between is skipped as a forced tile's backward-data is).
set -uo pipefail
source "$(dirname "$0")/../host.sh"
need_bin bench_conv_gpu || exit 1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -n1)
[ -n "$NCU" ] || { echo "ncu-conv: no ncu on this host"; exit 1; }
sections=(--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats
          --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section LaunchStats
          --section InstructionStats)
for item in ${PROFILES:-}; do
  name=${item%%=*}
  spec=${item#*=}
  IFS=/ read -r layer algo prec skip kernel <<< "$spec"
  layer=${layer//_/ }  # "_" stands for a space in the layer's name only (kernel names have "_")
  kernel=${kernel:-igemm}
  stage "$name: $layer $algo $prec (kernel $kernel, skip $skip)"
  timeout 240 "$NCU" --target-processes all -k "regex:$kernel" --launch-skip "$skip" --launch-count 1 \
    "${sections[@]}" "$BIN/bench_conv_gpu" --filter "$layer" --algos "$algo" --precisions "$prec" \
    --repeat 3 --out "$RESULTS/$name.csv" > "$RESULTS/$name.txt" 2>&1 || echo "$name: FAILED"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Bank Conflicts|Executed Ipc" "$RESULTS/$name.txt" | head -14
done
