#!/usr/bin/env bash
# scripts/gpu/bundle_mpi.sh OUT_DIR — adds this machine's Open MPI launcher to a GPU bundle made
# by prepare.sh (MPI=1 runs it; the GPU hosts have no MPI of their own): mpirun (orterun) and orted, every MCA
# plugin with the libraries they load, the help texts mpirun prints its messages from, and
# PMIx's plugins and help texts. The pdnn binaries' own libmpi is in runtime.tar.xz already.
#
# OUT_DIR gets ompi.tar.xz and mpi_env.sh; the mpirun wrapper that host.sh makes sources it
# after env.sh. Open MPI finds a moved install through the OPAL_* variables (its "installdirs env"
# component: OPAL_PREFIX and the folders under it), PMIx through PMIX_INSTALL_PREFIX; without
# them mpirun looks for its plugins and help files under /usr and fails on a host without MPI.
# scripts/gpu/check_mpi_bundle.sh proves it here: 2 ranks through the bundle's mpirun with the
# system's Open MPI hidden in a mount namespace.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 OUT_DIR" >&2; exit 2; }
out="$1"
mkdir -p "$out"
command -v ompi_info >/dev/null || { echo "bundle_mpi: no Open MPI here (openmpi-bin)" >&2; exit 1; }
orterun="$(readlink -f "$(command -v mpirun)")"
orted="$(dirname "$orterun")/orted"
path_of() { ompi_info --path "$1" --parsable | sed -n 's/^path:[a-z]*://p'; }
pkglibdir="$(path_of pkglibdir)"
pkgdatadir="$(path_of pkgdatadir)"
sysconfdir="$(path_of sysconfdir)"
# PMIx: Debian's Open MPI uses the external libpmix2; its prefix is two levels above the library.
pmix_lib="$(ldd "$pkglibdir"/mca_pmix_ext3x.so 2>/dev/null | awk '$1 ~ /^libpmix/ {print $3; exit}')"
pmix_prefix=""
[ -n "$pmix_lib" ] && pmix_prefix="$(dirname "$(dirname "$(readlink -f "$pmix_lib")")")"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
m="$stage/ompi"
mkdir -p "$m/bin" "$m/lib" "$m/plugins" "$m/share/openmpi" "$m/etc"
cp -L "$orterun" "$m/bin/orterun"
[ -x "$orted" ] && cp -L "$orted" "$m/bin/orted"
ln -s orterun "$m/bin/mpirun"
ln -s orterun "$m/bin/mpiexec"
cp -L "$pkglibdir"/*.so "$m/plugins/"
cp -rL "$pkgdatadir"/. "$m/share/openmpi/"
[ -f "$sysconfdir/openmpi-mca-params.conf" ] && cp -L "$sysconfdir/openmpi-mca-params.conf" "$m/etc/"
if [ -n "$pmix_prefix" ] && [ -d "$pmix_prefix/lib/pmix" ]; then
  mkdir -p "$m/pmix/lib" "$m/pmix/share"
  cp -rL "$pmix_prefix/lib/pmix" "$m/pmix/lib/"
  [ -d "$pmix_prefix/share/pmix" ] && cp -rL "$pmix_prefix/share/pmix" "$m/pmix/share/"
fi
# Every library the launcher and the plugins load, but glibc's (the host has its own) and the
# CUDA driver's. One ldd pass over all of them gives the transitive closure.
find "$m/bin" "$m/plugins" "$m/pmix" -type f \( -name '*.so' -o -perm -u+x \) -print0 2>/dev/null |
  xargs -0 ldd 2>/dev/null | awk '$3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    case "$name" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libutil.so*|libresolv.so*) ;;
      libcuda.so*|libnvidia*) ;;
      *) [ -e "$m/lib/$name" ] || cp -L "$path" "$m/lib/$name" ;;
    esac
  done
echo "bundle_mpi: $(ls "$m/plugins" | wc -l) plugins, $(ls "$m/lib" | wc -l) libraries," \
     "$(du -sh "$m" | cut -f1) uncompressed ($(orterun --version 2>/dev/null | head -1 || true))"
tar -C "$stage" -cf - ompi | xz -6 -T0 > "$out/ompi.tar.xz"
cat > "$out/mpi_env.sh" <<'EOS'
# Sourced by env.sh: Open MPI's launcher from ompi.tar.xz, unpacked once, relocated by OPAL_*.
_mc="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
_m=/tmp/rt/ompi
if [ ! -x "$_m/bin/orterun" ]; then
  mkdir -p /tmp/rt/.ompi.$$ && tar -xJf "$_mc/ompi.tar.xz" -C /tmp/rt/.ompi.$$ &&
    { mv /tmp/rt/.ompi.$$/ompi "$_m" 2>/dev/null || true; rm -rf /tmp/rt/.ompi.$$; }
fi
export OPAL_PREFIX="$_m" OPAL_EXEC_PREFIX="$_m" OPAL_BINDIR="$_m/bin" OPAL_LIBDIR="$_m/lib"
export OPAL_PKGLIBDIR="$_m/plugins" OPAL_DATAROOTDIR="$_m/share" OPAL_DATADIR="$_m/share"
export OPAL_PKGDATADIR="$_m/share/openmpi" OPAL_SYSCONFDIR="$_m/etc"
export PMIX_INSTALL_PREFIX="$_m/pmix" PMIX_MCA_mca_base_component_path="$_m/pmix/lib/pmix"
export PATH="$_m/bin:$PATH" LD_LIBRARY_PATH="$_m/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# One host, run as root in a container: shared memory between the ranks, loopback for the
# launcher, no InfiniBand/UCX probing.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_pml="${OMPI_MCA_pml:-ob1}" OMPI_MCA_btl="${OMPI_MCA_btl:-self,vader}"
export OMPI_MCA_osc="${OMPI_MCA_osc:-^ucx}" OMPI_MCA_mtl="${OMPI_MCA_mtl:-^ofi,psm,psm2}"
unset _m _mc
EOS
ls -la "$out/ompi.tar.xz"
