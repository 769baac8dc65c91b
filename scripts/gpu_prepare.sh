#!/usr/bin/env bash
# Prepares gpu-bundle/ (git-ignored) for a run on a lent GPU host: builds pdnn with its CUDA
# backend for Hopper (sm_90) and for AVX-512 hosts (x86-64-v4; the host is not this CPU, so no
# -march=native), bundles the binaries with their Debian libraries (scripts/gpu_bundle.sh) and
# copies the data sets named in DATA as gzip files (the IDX reader reads .gz; symbolic links do
# not travel). The host's copy of a working tree is limited to 64 MiB, the shipped Caltech
# photos included: keep DATA to what the visit needs. Then, on the host:
#   source gpu-bundle/env.sh && gpu-bundle/bin/pdnn_tests
#   DATA="mnist-npm10k fashion-mnist" BINS="mnist pi pdnn_tests" scripts/gpu_prepare.sh
#   DATA= BINS="caltech101 pdnn_tests" scripts/gpu_prepare.sh   (then scripts/gpu_caltech.sh there)
# MPI=1 also carries Open MPI's launcher (scripts/gpu_bundle_mpi.sh: mpirun, its plugins and
# help files, relocated with OPAL_PREFIX; ~5 MB): the GPU hosts have no MPI, and --distributed
# runs need mpirun there (scripts/gpu_wrap.sh then makes an mpirun wrapper too). NCCL is not
# carried (libnccl.so.2 is 218 MB): pdnn opens the host's at run time (scripts/gpu_dist.sh
# finds it).
#   MPI=1 DATA=fashion-mnist BINS="mnist bench_allreduce pdnn_tests" scripts/gpu_prepare.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA-mnist-npm10k}  # DATA= (empty): no IDX set (the Caltech photos travel in the tree)
BINS=${BINS:-mnist pi pdnn_tests}
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DPDNN_ARCH=x86-64-v4 -DPDNN_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build build-gpu -j "$(nproc)" --target $BINS
scripts/gpu_bundle.sh gpu-bundle $(for b in $BINS; do echo build-gpu/bin/$b; done)
rm -f gpu-bundle/ompi.tar.xz gpu-bundle/mpi_env.sh
if [ "${MPI:-0}" = 1 ]; then scripts/gpu_bundle_mpi.sh gpu-bundle; fi
rm -rf gpu-bundle/data
mkdir -p gpu-bundle/data
for d in $DATA; do
  src=datasets/$d
  [ "$d" = fashion-mnist ] && [ ! -d "$src" ] && src=/usr/share/datasets/fashion-mnist
  [ -d "$src" ] || { echo "gpu_prepare: no $src (datasets/get_*.sh)" >&2; exit 1; }
  mkdir -p "gpu-bundle/data/$d"
  for f in "$src"/*; do
    b=$(basename "$f")
    case "$b" in
      *.gz) cp -L "$f" "gpu-bundle/data/$d/$b" ;;
      *ubyte) gzip -9 -c "$f" > "gpu-bundle/data/$d/$b.gz" ;;
      *) cp -L "$f" "gpu-bundle/data/$d/$b" ;;
    esac
  done
done
du -sh gpu-bundle
echo "tree that travels: $(( ($(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1) + $(du -sb gpu-bundle | cut -f1)) / 1048576 )) MiB of 64"
