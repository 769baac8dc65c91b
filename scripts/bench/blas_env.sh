# Sourced (with BIN set) by the benchmarks that time PyTorch or numpy beside pdnn: the Python side
# gets the OpenBLAS kernels pdnn runs, pdnn's choice where OpenBLAS misdetects the CPU
# (build/bin/blas_core --env prints nothing when the environment or OpenBLAS has chosen; the
# make targets export the same).
blas_env=$("$BIN/blas_core" --env 2>/dev/null || true)
# shellcheck disable=SC2086  # NAME=value words, split on purpose
[ -z "$blas_env" ] || export $blas_env
