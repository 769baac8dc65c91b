# scripts/gpu/host.sh: the one preamble of the host-side runners (source it; it is no command).
# On a lent GPU host, in the repository root of the copy the device tool made, after
# scripts/gpu/prepare.sh here. It sets, unless the caller already did:
#   RUNNER    the runner's name (from $0), RESULTS its output folder (results/gpu-run/RUNNER)
#   BUNDLE    gpu-bundle (prepare.sh's folder), made absolute
#   BIN       /tmp/pdnn-bin: one wrapper per bundled binary that sources BUNDLE/env.sh and runs
#             it, so only pdnn's binaries see the bundle's LD_LIBRARY_PATH (the host's python3
#             keeps its own libraries), and BIN/mpirun when the bundle carries Open MPI. Give
#             BIN=build/bin on a machine with its own CUDA build and the Debian packages.
#   PYTHON    python3 (with torch); run it through `py`, which drops LD_LIBRARY_PATH
#   PDNN_CUDNN_LIBRARY, PDNN_NCCL_LIBRARY   the host's cuDNN and NCCL for pdnn's dlopen: the
#             CUDA install's, else those of the host Python's nvidia wheels (nvidia/cudnn/lib,
#             nvidia/nccl/lib)
# and defines stage (a timed headline), need_bin NAME... (fails naming the BINS to prepare),
# link_datasets (datasets/NAME -> BUNDLE/data/NAME, for scripts that look under datasets/).
# Interactive use:  source scripts/gpu/host.sh && $BIN/mnist --device cuda ...
RUNNER=${RUNNER:-$(basename "${0%.sh}")}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
RESULTS=${RESULTS:-results/gpu-run/$RUNNER}
BUNDLE=${BUNDLE:-gpu-bundle}
case $BUNDLE in /*) ;; *) BUNDLE=$ROOT/$BUNDLE ;; esac
PYTHON=${PYTHON:-python3}
mkdir -p "$RESULTS"

py() { env -u LD_LIBRARY_PATH "$PYTHON" "$@"; }

# One wrapper per bundled binary (and mpirun): sources the bundle's env.sh, then execs it.
make_wrappers() {
  local dir=$1 b
  mkdir -p "$dir"
  for b in "$BUNDLE"/bin/*; do
    [ -e "$b" ] || continue
    printf '#!/usr/bin/env bash\nsource %s/env.sh\nexec %s "$@"\n' "$BUNDLE" "$b" \
      > "$dir/$(basename "$b")"
    chmod +x "$dir/$(basename "$b")"
  done
  if [ -f "$BUNDLE/mpi_env.sh" ]; then
    printf '#!/usr/bin/env bash\nsource %s/env.sh\nsource %s/mpi_env.sh\nexec /tmp/rt/ompi/bin/orterun "$@"\n' \
      "$BUNDLE" "$BUNDLE" > "$dir/mpirun"
    chmod +x "$dir/mpirun"
  fi
}
if [ -z "${BIN:-}" ]; then
  BIN=/tmp/pdnn-bin
  make_wrappers "$BIN"
fi

# The host's cuDNN and NCCL (pdnn opens both at run time; neither travels in the bundle).
_py_lib() {  # _py_lib MODULE FILE: FILE in the host Python's nvidia wheel MODULE, if any
  py -c "import os, nvidia.$1 as m; p = os.path.join(list(m.__path__)[0], 'lib', '$2'); print(p if os.path.exists(p) else '')" 2>/dev/null
}
_first() { local f; for f in "$@"; do [ -n "$f" ] && [ -e "$f" ] && { echo "$f"; return 0; }; done; return 0; }
if [ -z "${PDNN_CUDNN_LIBRARY:-}" ]; then
  PDNN_CUDNN_LIBRARY=$(_first /usr/local/cuda/lib64/libcudnn.so.9 "$(_py_lib cudnn libcudnn.so.9)" \
    /opt/*/.venv/lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9 \
    /usr/local/lib/python3*/dist-packages/nvidia/cudnn/lib/libcudnn.so.9)
  [ -n "$PDNN_CUDNN_LIBRARY" ] && export PDNN_CUDNN_LIBRARY || unset PDNN_CUDNN_LIBRARY
fi
if [ -z "${PDNN_NCCL_LIBRARY:-}" ]; then
  PDNN_NCCL_LIBRARY=$(_first /usr/local/cuda/lib64/libnccl.so.2 \
    /usr/local/cuda/targets/x86_64-linux/lib/libnccl.so.2 /usr/local/cuda-*/lib64/libnccl.so.2 \
    /usr/lib/x86_64-linux-gnu/libnccl.so.2 "$(_py_lib nccl libnccl.so.2)" \
    /opt/*/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2 \
    /usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2)
  [ -n "$PDNN_NCCL_LIBRARY" ] && export PDNN_NCCL_LIBRARY || unset PDNN_NCCL_LIBRARY
fi
unset -f _py_lib _first

_t0=$(date +%s)
stage() { echo "== [$RUNNER $(( $(date +%s) - _t0 )) s] $*"; }

need_bin() {  # need_bin NAME...: every NAME must be in BIN
  local b missing=()
  for b in "$@"; do [ -x "$BIN/$b" ] || missing+=("$b"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "$RUNNER: no ${missing[*]} in $BIN: here, BINS=\"$*\" scripts/gpu/prepare.sh first" >&2
  return 1
}

link_datasets() {  # the apps and scripts look under datasets/: point there at the bundle's data
  local d
  mkdir -p datasets
  for d in "$BUNDLE"/data/*; do
    [ -e "$d" ] || continue
    [ -e "datasets/$(basename "$d")" ] || ln -s "$d" "datasets/$(basename "$d")"
  done
}
