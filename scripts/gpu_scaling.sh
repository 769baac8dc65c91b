#!/usr/bin/env bash
# Runs on a lent GPU host after scripts/gpu_prepare.sh here: the thread sweeps of
# scripts/scaling.sh on the host's 16 CPU cores (pdnn's CPU paths; OpenBLAS told the core by
# gpu-bundle/env.sh), into $OUT/scaling_gpuhost.csv. Only the bundled binaries get the bundle's
# LD_LIBRARY_PATH (through small wrappers), so the host's python3 keeps its own libraries.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-results/gpu-run}"; mkdir -p "$OUT"
wrap=$(mktemp -d)
for b in pi mnist; do
  printf '#!/usr/bin/env bash\nsource %s/gpu-bundle/env.sh\nexec %s/gpu-bundle/bin/%s "$@"\n' \
    "$PWD" "$PWD" "$b" > "$wrap/$b"
  chmod +x "$wrap/$b"
done
BIN=$wrap THREADS=${THREADS:-1,2,4,8,12,16} PYTHON=${PYTHON:-python3} \
  MNIST_ARGS="--data gpu-bundle/data/mnist-npm10k" OUT="$OUT/scaling_gpuhost.csv" scripts/scaling.sh
