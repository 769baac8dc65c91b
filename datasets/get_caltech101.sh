#!/usr/bin/env bash
# Caltech101 for build/bin/caltech101 (W4). Three ways to run it:
#
#   datasets/get_caltech101.sh
#       Checks the six W4 classes that ship with pdnn, datasets/caltech101-6/, against
#       datasets/caltech101-6.sha256: all 2,600 files present and unchanged, and no other file.
#
#   datasets/get_caltech101.sh --download [--classes a,b,c] [--out DIR]
#       Downloads the official archive caltech-101.zip (137 MB; CaltechDATA record 20086,
#       https://data.caltech.edu/records/mzrjq-6wc02) and extracts the classes asked for
#       (default: all 101 object classes; BACKGROUND_Google, clutter, only when named) into
#       DIR (default datasets/caltech101), one folder per class.
#
#   datasets/get_caltech101.sh --archive FILE [--classes a,b,c] [--out DIR]
#       The same from a copy you already have: caltech-101.zip or the 101_ObjectCategories.tar.gz
#       inside it.
#
# Checks: the MD5 of caltech-101.zip (3138e1922a9193bfa496528edbbc45d0) and of the
# 101_ObjectCategories.tar.gz inside it (b224c7392d521a49829488ab0f1120d9: the figures
# torchvision and other loaders publish for these files), and every extracted file of the six
# W4 classes against datasets/caltech101-6.sha256.
# The development machine has no internet: the download and extraction paths have not been run
# against the real archive there (only against a stand-in with its checksums substituted).
# Files go to a temporary folder and are renamed into place at the end: an interrupted run
# leaves nothing that looks complete. DIR is replaced only if this script made it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

ZIP_URL="https://data.caltech.edu/records/mzrjq-6wc02/files/caltech-101.zip?download=1"
ZIP_MD5=3138e1922a9193bfa496528edbbc45d0
TGZ_MD5=b224c7392d521a49829488ab0f1120d9
LIST=datasets/caltech101-6.sha256
SHIPPED=datasets/caltech101-6
MARK=.made-by-get_caltech101

die() { echo "get_caltech101: $*" >&2; exit 1; }
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

mode=verify classes="" out=datasets/caltech101 archive=""
while [ $# -gt 0 ]; do
  case "$1" in
    --download) mode=fetch ;;
    --archive) [ $# -ge 2 ] || die "--archive needs a file"; mode=fetch; archive=$2; shift ;;
    --classes) [ $# -ge 2 ] || die "--classes needs a list (a,b,c)"; classes=$2; shift ;;
    --out) [ $# -ge 2 ] || die "--out needs a folder"; out=$2; shift ;;
    -h|--help) usage 0 ;;
    *) echo "get_caltech101: unknown option '$1'" >&2; usage 2 ;;
  esac
  shift
done

# ---- the shipped six classes ----------------------------------------------------------------
if [ "$mode" = verify ]; then
  [ -z "$classes" ] || die "--classes goes with --download or --archive (the shipped folder has the six W4 classes)"
  [ -d "$SHIPPED" ] || die "$SHIPPED is missing (it ships with pdnn: git checkout -- $SHIPPED)"
  (cd "$SHIPPED" && sha256sum --quiet --strict -c "../$(basename "$LIST")") ||
    die "$SHIPPED: files differ from $LIST (above); restore them with git checkout -- $SHIPPED"
  extra=$(cd "$SHIPPED" && find . -type f ! -name "$MARK" | sed 's|^\./||' | sort |
          comm -23 - <(awk '{print $2}' "../$(basename "$LIST")" | sort))
  [ -z "$extra" ] || die "$SHIPPED holds files not in $LIST: $(echo "$extra" | head -5 | tr '\n' ' ')"
  echo "get_caltech101: $SHIPPED: $(wc -l < "$LIST") files match $LIST"
  exit 0
fi

# ---- the official archive --------------------------------------------------------------------
case "$out" in */) out=${out%/} ;; esac
[ -n "$out" ] || die "--out is empty"
if [ -e "$out" ] && [ ! -e "$out/$MARK" ]; then
  die "$out exists and was not made by this script: remove it or choose --out"
fi
mkdir -p "$(dirname "$out")"
tmp=$(mktemp -d "$(dirname "$out")/.caltech101.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

md5_of() { md5sum "$1" | cut -d' ' -f1; }

if [ -z "$archive" ]; then
  command -v curl >/dev/null || die "no curl (scripts/tools/install_deps.sh installs it)"
  echo "get_caltech101: downloading $ZIP_URL (137 MB)"
  curl -fL --connect-timeout 10 --retry 2 -o "$tmp/caltech-101.zip" "$ZIP_URL" ||
    die "download failed (no internet?); the six W4 classes ship in $SHIPPED"
  archive=$tmp/caltech-101.zip
fi
[ -f "$archive" ] || die "$archive: no such file"

tgz=""
if [ "$(head -c 2 "$archive" | od -An -tx1 | tr -d ' ')" = 504b ]; then  # "PK": a zip
  [ "$(md5_of "$archive")" = "$ZIP_MD5" ] ||
    die "$archive: MD5 $(md5_of "$archive"), expected $ZIP_MD5 (damaged or another file)"
  "$PY" - "$archive" "$tmp" <<'EOF'
import sys, zipfile
name = "caltech-101/101_ObjectCategories.tar.gz"
with zipfile.ZipFile(sys.argv[1]) as z:
    if name not in z.namelist():
        sys.exit(f"get_caltech101: {sys.argv[1]} has no {name}")
    with z.open(name) as src, open(sys.argv[2] + "/101_ObjectCategories.tar.gz", "wb") as dst:
        while True:
            chunk = src.read(1 << 20)
            if not chunk:
                break
            dst.write(chunk)
EOF
  tgz=$tmp/101_ObjectCategories.tar.gz
else
  tgz=$archive
fi
[ "$(md5_of "$tgz")" = "$TGZ_MD5" ] ||
  die "$tgz: MD5 $(md5_of "$tgz"), expected $TGZ_MD5 (damaged or another file)"

# Class folders in the archive, and the ones asked for.
mapfile -t have < <(tar -tzf "$tgz" | awk -F/ '$1 == "101_ObjectCategories" && NF >= 3 && $2 != "" {print $2}' | sort -u)
[ ${#have[@]} -gt 0 ] || die "$tgz holds no 101_ObjectCategories/<class>/ folders"
want=()
if [ -n "$classes" ]; then
  IFS=, read -r -a want <<< "$classes"
  for c in "${want[@]}"; do
    [ -n "$c" ] || die "--classes '$classes' has an empty name"
    printf '%s\n' "${have[@]}" | grep -qxF -- "$c" ||
      die "class '$c' is not in the archive (it has: $(printf '%s ' "${have[@]}" | head -c 300)...)"
  done
else
  for c in "${have[@]}"; do [ "$c" = BACKGROUND_Google ] || want+=("$c"); done
fi

echo "get_caltech101: extracting ${#want[@]} classes"
members=()
for c in "${want[@]}"; do members+=("101_ObjectCategories/$c"); done
tar -xzf "$tgz" -C "$tmp" "${members[@]}"
mv "$tmp/101_ObjectCategories" "$tmp/out"

# The six W4 classes' files against the shipped list, for every one of them extracted.
checked=0
for c in "${want[@]}"; do
  if grep -qF "  $c/" "$LIST"; then
    (cd "$tmp/out" && grep -F "  $c/" "$OLDPWD/$LIST" | sha256sum --quiet --strict -c -) ||
      die "class $c: files differ from $LIST"
    checked=$((checked + $(grep -cF "  $c/" "$LIST")))
  fi
done

touch "$tmp/out/$MARK"
chmod 755 "$tmp/out"
rm -rf "$out"
mv "$tmp/out" "$out"
n=$(find "$out" -type f ! -name "$MARK" | wc -l)
echo "get_caltech101: $n images in ${#want[@]} classes in $out" \
     "($checked of them checked against $LIST)"
echo "get_caltech101: train on them with: build/bin/caltech101 --data $out${classes:+ --classes $classes}"
