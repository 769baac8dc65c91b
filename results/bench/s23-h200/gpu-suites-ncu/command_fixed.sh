#!/usr/bin/env bash
# s23 call F (nvidia-h200): the CudaRuntime tests at 3f6cf43 + the metrics test's fix (the copy
# back is four doubles since the U-Net's Dice loss, 545632c).
set -u
export BUNDLE=gpu-bundle-t23
FILTER='CudaRuntime.*:KernelKitGpu.SplitSum*' VISIT_RESULTS=$OUT/f1 timeout 200 bash scripts/gpu/visit.sh tests 2>&1 | tail -6
