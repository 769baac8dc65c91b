#!/usr/bin/env bash
# gpu_wrap.sh DIR: on a GPU host, one wrapper script in DIR per binary of gpu-bundle/bin that
# sources gpu-bundle/env.sh and runs it, so only pdnn's binaries get the bundle's
# LD_LIBRARY_PATH and the host's python3 (PyTorch) keeps its own libraries; and DIR/mpirun when
# the bundle carries Open MPI (MPI=1 scripts/gpu_prepare.sh). Then:
#   BIN=DIR scripts/bench_gpu.sh;  DIR/mpirun -np 2 DIR/mnist ... --distributed
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
for b in "$root"/gpu-bundle/bin/*; do
  printf '#!/usr/bin/env bash\nsource %s/gpu-bundle/env.sh\nexec %s "$@"\n' "$root" "$b" \
    > "$1/$(basename "$b")"
  chmod +x "$1/$(basename "$b")"
done
if [ -f "$root/gpu-bundle/mpi_env.sh" ]; then
  printf '#!/usr/bin/env bash\nsource %s/gpu-bundle/env.sh\nsource %s/gpu-bundle/mpi_env.sh\nexec /tmp/rt/ompi/bin/orterun "$@"\n' \
    "$root" "$root" > "$1/mpirun"
  chmod +x "$1/mpirun"
fi
