#!/usr/bin/env bash
# scripts/gpu/check_mpi_bundle.sh [BUILD]: proves here that a GPU bundle's Open MPI (bundle_mpi.sh)
# runs on a host without MPI. Bundles BUILD/bin/bench_allreduce (default build/) with its
# libraries and the launcher into a temporary folder, then, in a private mount namespace
# (root: unshare -m) where the system's Open MPI (its plugin, help and PMIx folders, mpirun,
# orted and libraries) is hidden and /tmp/rt is a fresh tmpfs, runs 2 ranks of it through the
# bundle's mpirun, and once more without the OPAL_* relocation, which must fail.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
[ -x "$build/bin/bench_allreduce" ] || { echo "check_mpi_bundle: no $build/bin/bench_allreduce" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "check_mpi_bundle: needs root (unshare -m)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
scripts/gpu/prepare.sh --bundle "$tmp/gpu-bundle" "$build/bin/bench_allreduce" > /dev/null
scripts/gpu/bundle_mpi.sh "$tmp/gpu-bundle" > "$tmp/bundle.log"
head -n 1 "$tmp/bundle.log"
cat > "$tmp/inside.sh" <<'EOS'
set -euo pipefail
mount -t tmpfs none /tmp/rt
mkdir -p "$1/empty"
lib=/usr/lib/x86_64-linux-gnu
for d in "$lib/openmpi" /usr/share/openmpi /etc/openmpi "$lib/pmix2"; do
  [ -d "$d" ] && mount --bind "$1/empty" "$d"
done
for f in /usr/bin/orterun /usr/bin/orted /usr/bin/ompi_info "$lib"/libopen-rte.so.40 \
         "$lib"/libopen-pal.so.40 "$lib"/libmpi.so.40 "$lib"/libpmix.so.2; do
  [ -e "$f" ] && mount --bind /dev/null "$(readlink -f "$f")"
done
source "$1/gpu-bundle/env.sh"
source "$1/gpu-bundle/mpi_env.sh"
echo "check_mpi_bundle: system Open MPI hidden; mpirun is $(command -v mpirun)"
mpirun -np 2 --bind-to none "$1/gpu-bundle/bin/bench_allreduce" --sizes-mb 1 --iters 3 --warmup 1
unset OPAL_PREFIX OPAL_EXEC_PREFIX OPAL_BINDIR OPAL_LIBDIR OPAL_PKGLIBDIR OPAL_DATAROOTDIR \
      OPAL_DATADIR OPAL_PKGDATADIR OPAL_SYSCONFDIR
if mpirun -np 2 "$1/gpu-bundle/bin/bench_allreduce" --sizes-mb 1 --iters 1 >/dev/null 2>&1; then
  echo "check_mpi_bundle: FAILED: mpirun ran without the relocation, so the test hid nothing"
  exit 1
fi
echo "check_mpi_bundle: OK (and without OPAL_* the launcher fails, as it should)"
EOS
mkdir -p /tmp/rt
unshare -m --propagation private bash "$tmp/inside.sh" "$tmp"
