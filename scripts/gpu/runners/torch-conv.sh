#!/usr/bin/env bash
# torch-conv: PyTorch's (cuDNN's) time for the same convolutions as the conv runner, each pass
# on its own (scripts/twins/torch_conv_layers.py) -> $RESULTS/conv_gpu_torch.csv. Needs only the
# host's python3 with torch (no bundle). Knobs: PRECISIONS (fp32,tf32; bf16 too), REPEAT (20), FILTER.
set -uo pipefail
source "$(dirname "$0")/../host.sh"
args=(--out "$RESULTS/conv_gpu_torch.csv" --precisions "${PRECISIONS:-fp32,tf32}"
      --repeat "${REPEAT:-20}")
[ -n "${FILTER:-}" ] && args+=(--filter "$FILTER")
py scripts/twins/torch_conv_layers.py "${args[@]}"
