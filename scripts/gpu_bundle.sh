#!/usr/bin/env bash
# gpu_bundle.sh OUT_DIR BINARY... (from the shared GPU recipe) — make OUT_DIR a self-contained runtime for BINARYs built on this
# Debian 12 machine, to run them on an x86-64 GPU host that has the NVIDIA driver and CUDA 13
# but no package access (glibc >= 2.36 there).
#
# OUT_DIR gets: bin/ (the binaries), runtime.tar.xz (their shared libraries), env.sh.
# On the GPU host, from the same checkout path:   source OUT_DIR/env.sh && OUT_DIR/bin/NAME
#
# What the bundle holds: every library `ldd` lists for the binaries EXCEPT
#   - glibc itself (libc, libm, libpthread, libdl, librt, ld-linux): the host has its own;
#   - libstdc++/libgcc_s: the host's are newer (kept in compat/ only as a fallback);
#   - the CUDA libraries (libcuda, libcudart, libcublas*, libcudnn*): they must come from the
#     host's own CUDA install, which matches its driver.
# TRIM=1 (default) replaces libgdal.so.32 — pulled in by OpenCV's imgcodecs for its optional GDAL
# reader, dragging ~90 more libraries (130 MB) — by a stub whose functions return 0/NULL. OpenCV
# calls GDALAllRegister() when it registers its codecs; GDAL then opens nothing, and every other
# codec works. That shrinks the bundle from ~51 MB to ~17 MB compressed. TRIM=0 keeps the real one.
set -euo pipefail
TRIM="${TRIM:-1}"
[ $# -ge 2 ] || { echo "usage: $0 OUT_DIR BINARY..." >&2; exit 2; }
CARRY="$1"; shift
bundle() {
  [ $# -ge 1 ] || { echo "bundle: give the binaries" >&2; exit 2; }
  local stage; stage="$(mktemp -d)"
  mkdir -p "$stage/lib" "$stage/compat" "$CARRY/bin"
  rm -f "$CARRY"/bin/*
  cp "$@" "$CARRY/bin/"
  if [ "$TRIM" = 1 ]; then gdal_stub "$stage/lib" "$@"; fi
  # one ldd pass resolves the whole transitive closure; LD_LIBRARY_PATH makes it see the stub
  LD_LIBRARY_PATH="$stage/lib" ldd "$@" | awk '$3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    case "$name" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libutil.so*|libresolv.so*) ;;
      libcuda.so*|libcudart.so*|libcublas*|libcudnn*|libnvidia*) ;;
      libstdc++.so*|libgcc_s.so*) cp -L "$path" "$stage/compat/$name" ;;
      *) [ -e "$stage/lib/$name" ] || cp -L "$path" "$stage/lib/$name" ;;
    esac
  done
  # check: nothing the binaries need may resolve outside the bundle except the excluded families
  if LD_LIBRARY_PATH="$stage/lib" ldd "$@" | grep -E 'not found'; then echo "unresolved libs" >&2; exit 1; fi
  echo "bundle: $(ls "$stage/lib" | wc -l) libs, $(du -sh "$stage/lib" | cut -f1) uncompressed"
  tar -C "$stage" -cf - lib compat | xz -6 -T0 > "$CARRY/runtime.tar.xz"
  rm -rf "$stage"
  cat > "$CARRY/env.sh" <<'EOS'
# source me on the GPU host: unpack the runtime libs once, set LD_LIBRARY_PATH.
_c="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ ! -d /tmp/rt/lib ]; then mkdir -p /tmp/rt && tar -xJf "$_c/runtime.tar.xz" -C /tmp/rt; fi
# CUDA libs from the host's own install: the toolkit's lib64, else a Python environment's CUDA wheels
_cu=/usr/local/cuda/lib64
if [ ! -e "$_cu/libcublas.so.13" ]; then
  # else a Python environment's CUDA wheels (site-packages/nvidia/*/lib)
  _cu="$(ls /opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib/libcublas.so.13 /usr/local/lib/python3*/dist-packages/nvidia/*/lib/libcublas.so.13 2>/dev/null | head -n1)"
  _cu="${_cu%/libcublas.so.13}"
fi
export LD_LIBRARY_PATH="/tmp/rt/lib${_cu:+:$_cu}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}"
# Debian 12's OpenBLAS 0.3.21 (DYNAMIC_ARCH) may not recognise a virtual CPU (seen: "Intel(R)
# Xeon(R) Processor" with AVX-512 + AMX) and fall back to its Prescott (SSE3) kernels: 4-6x slower
# SGEMM. Name the core unless the caller already did.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  if grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi
fi
unset _c _cu
EOS
  ls -la "$CARRY" "$CARRY/bin"; du -sh "$CARRY"
}

# Stub for libgdal.so.32: defines exactly the GDAL symbols the given binaries' OpenCV needs.
gdal_stub() {
  local out="$1"; shift
  local gdal; gdal="$(ldd "$@" | awk '$1 ~ /^libgdal\.so/ && !f {print $3; f=1}')"  # no early exit: SIGPIPE + pipefail
  [ -n "$gdal" ] || return 0
  local soname; soname="$(basename "$gdal")"
  local tmp; tmp="$(mktemp -d)"
  nm -D --defined-only "$gdal" | awk '{print $3}' | sed 's/@.*//' | sort -u > "$tmp/def"
  # every library in the closure that NEEDs libgdal: collect its undefined symbols
  for lib in $(ldd "$@" | awk '$3 ~ /^\// {print $3}' | sort -u); do
    if readelf -d "$lib" 2>/dev/null | grep "NEEDED.*\[$soname\]" >/dev/null; then  # not grep -q: SIGPIPE + pipefail
      nm -D --undefined-only "$lib" | awk '{print $2}' | sed 's/@.*//'
    fi
  done | sort -u | comm -12 - "$tmp/def" > "$tmp/syms"
  {
    # every stub returns 0/NULL: OpenCV calls GDALAllRegister() when it registers its codecs,
    # and GDALOpen() returning NULL just makes the (opt-in, IMREAD_LOAD_GDAL) GDAL reader fail.
    echo '/* generated by gpu_bundle.sh: no-op stand-ins for GDAL */'
    while read -r s; do echo "long $s(void){return 0;}"; done < "$tmp/syms"
  } > "$tmp/stub.c"
  gcc -shared -fPIC -O1 -Wl,-soname,"$soname" -o "$out/$soname" "$tmp/stub.c"
  echo "gdal stub: $(wc -l < "$tmp/syms") symbols -> $soname"
  rm -rf "$tmp"
}

bundle "$@"
