#!/usr/bin/env bash
# Prepares gpu-bundle/ (git-ignored) for a run on a lent GPU host: builds pdnn for AVX-512
# hosts (x86-64-v4; the host is not this CPU, so no -march=native), bundles the binaries with
# their Debian libraries (scripts/gpu_bundle.sh) and copies the data sets as plain files
# (symbolic links do not travel). Then, on the host: `source gpu-bundle/env.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DPDNN_ARCH=x86-64-v4 -DPDNN_CUDA=OFF >/dev/null
cmake --build build-gpu -j "$(nproc)" --target mnist pi bench_conv pdnn_tests
scripts/gpu_bundle.sh gpu-bundle build-gpu/bin/mnist build-gpu/bin/pi build-gpu/bin/bench_conv \
  build-gpu/bin/pdnn_tests
mkdir -p gpu-bundle/data
for d in datasets/mnist-npm10k datasets/fashion-mnist; do
  [ -d "$d" ] || continue
  rm -rf "gpu-bundle/data/$(basename "$d")"
  cp -rL "$d" gpu-bundle/data/
done
du -sh gpu-bundle
