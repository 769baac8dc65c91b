#!/usr/bin/env bash
# Puts Fashion-MNIST (60,000/10,000 28x28 greyscale clothing images, 10 classes, the MNIST IDX
# format) in datasets/fashion-mnist/ as symbolic links to Debian's package
# dataset-fashion-mnist (/usr/share/datasets/fashion-mnist), installing the package when it is
# missing (scripts/tools/install_deps.sh fashion).
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=/usr/share/datasets/fashion-mnist
OUT=datasets/fashion-mnist
FILES=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz
       t10k-labels-idx1-ubyte.gz)
# MD5 of the files as Debian 12 ships them (they differ from the sums torchvision lists for
# the upstream .gz files; pdnn's reader validates the contents either way).
declare -A MD5=(
  [train-images-idx3-ubyte.gz]=cf8536b0aa1a6ac5fa3f23001093305c
  [train-labels-idx1-ubyte.gz]=10bea18fdb374794d4bb42e356e600c9
  [t10k-images-idx3-ubyte.gz]=f78720b4224f21cce2f2ccf2d7a94c9a
  [t10k-labels-idx1-ubyte.gz]=0d30e22e447f3c33dab9ed536400ac01
)

complete() {
  local f
  for f in "${FILES[@]}"; do [ -e "$OUT/$f" ] || return 1; done
  [ "$(cat "$OUT/NAME" 2>/dev/null)" = fashion-mnist ]
}
if complete; then
  echo "get_fashion_mnist: using $OUT"
  exit 0
fi
[ -f "$SRC/${FILES[0]}" ] || scripts/tools/install_deps.sh fashion
for f in "${FILES[@]}"; do
  [ -f "$SRC/$f" ] || { echo "get_fashion_mnist: $SRC/$f missing (package dataset-fashion-mnist)" >&2; exit 1; }
  sum=$(md5sum "$SRC/$f" | cut -d' ' -f1)
  [ "$sum" = "${MD5[$f]}" ] || echo "get_fashion_mnist: note: $SRC/$f has MD5 $sum, not ${MD5[$f]} (another package version?); pdnn's reader still validates it" >&2
done
tmp=$(mktemp -d datasets/.fashion.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
for f in "${FILES[@]}"; do ln -s "$SRC/$f" "$tmp/$f"; done
echo fashion-mnist > "$tmp/NAME"
rm -rf "$OUT"
mv "$tmp" "$OUT"
echo "get_fashion_mnist: Fashion-MNIST (60,000/10,000) linked in $OUT"
