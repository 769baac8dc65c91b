#!/usr/bin/env bash
# Clothing Co-Parsing (CCP) person segmentation for pdnn (lib/data/image_mask_pairs.h). Ways to
# run it:
#
#   datasets/get_ccp.sh [--check]
#       Checks the subset that ships with pdnn, datasets/ccp-200/ (200 pairs, photos resized to
#       a shorter side of 256), against datasets/ccp-200.sha256: every file present and
#       unchanged, and no other file. Offline; ctest runs it (Datasets.CcpSubsetChecksums).
#
#   datasets/get_ccp.sh --download [--out DIR] [--short-side N]
#       Downloads the 1,004 annotated photos, their label maps and label_list.mat from GitHub
#       (bearpaw/clothing-co-parsing at commit fe34fb7, 65 MB, 2,009 files), checks every file
#       against datasets/ccp-source.sha256, and converts them (datasets/ccp_convert.py) into DIR
#       (default datasets/ccp-full): all 1,003 pairs with a label map (0536's is empty), the
#       photos unchanged (550 x 801-873) or, with --short-side N, resized as the subset's are.
#       Without internet it says so, checks the shipped subset and points to it.
#
#   datasets/get_ccp.sh --source SRC [--out DIR] [--short-side N]
#       The same from a copy of the repository's files you already have (a clone checked out
#       at fe34fb7, or the folder a download left): SRC/photos, SRC/annotations/pixel-level,
#       SRC/label_list.mat, checked against the same list.
#
# CCP_BASE_URL replaces the download address (a mirror holding the same paths); PDNN_OFFLINE=1
# skips the download. The conversion needs Debian's python3-scipy, python3-numpy and
# python3-pil (scripts/tools/install_deps.sh ccp). DIR is written under a temporary name and renamed
# at the end, and replaced only if this script made it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

COMMIT=fe34fb77721a9973fbae92c05f7f12b664d10110
BASE_URL=${CCP_BASE_URL:-https://raw.githubusercontent.com/bearpaw/clothing-co-parsing/$COMMIT}
SOURCES=datasets/ccp-source.sha256
SHIPPED=datasets/ccp-200
LIST=datasets/ccp-200.sha256
MARK=.made-by-get_ccp

die() { echo "get_ccp: $*" >&2; exit 1; }
usage() { sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

check_shipped() {
  [ -d "$SHIPPED" ] || die "$SHIPPED is missing (it ships with pdnn: git checkout -- $SHIPPED)"
  (cd "$SHIPPED" && sha256sum --quiet --strict -c "../$(basename "$LIST")") ||
    die "$SHIPPED: files differ from $LIST (above); restore them with git checkout -- $SHIPPED"
  local extra
  extra=$(cd "$SHIPPED" && find . -type f | sed 's|^\./||' | sort |
          comm -23 - <(awk '{print $2}' "../$(basename "$LIST")" | sort))
  [ -z "$extra" ] || die "$SHIPPED holds files not in $LIST: $(echo "$extra" | head -5 | tr '\n' ' ')"
  echo "get_ccp: $SHIPPED: $(wc -l < "$LIST") files match $LIST"
}

mode=check out=datasets/ccp-full short=0 src=""
while [ $# -gt 0 ]; do
  case "$1" in
    --check) mode=check ;;
    --download) mode=fetch ;;
    --source) [ $# -ge 2 ] || die "--source needs a folder"; mode=fetch; src=$2; shift ;;
    --out) [ $# -ge 2 ] || die "--out needs a folder"; out=$2; shift ;;
    --short-side) [ $# -ge 2 ] || die "--short-side needs a number"; short=$2; shift ;;
    -h|--help) usage 0 ;;
    *) echo "get_ccp: unknown option '$1'" >&2; usage 2 ;;
  esac
  shift
done
case "$short" in ''|*[!0-9]*) die "--short-side '$short' is not a number of pixels" ;; esac

if [ "$mode" = check ]; then
  check_shipped
  exit 0
fi

# ---- the full set: downloaded or from a copy, checked, converted -----------------------------
case "$out" in */) out=${out%/} ;; esac
[ -n "$out" ] || die "--out is empty"
[ "$(cd "$(dirname "$out")" 2>/dev/null && pwd)/$(basename "$out")" != "$(pwd)/$SHIPPED" ] ||
  die "--out $out is the shipped subset; choose another folder"
if [ -e "$out" ] && [ ! -e "$out/$MARK" ]; then
  die "$out exists and was not made by this script: remove it or choose --out"
fi
mkdir -p "$(dirname "$out")"
tmp=$(mktemp -d "$(dirname "$out")/.ccp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

if [ -z "$src" ]; then
  offline() {
    echo "get_ccp: $*" >&2
    echo "get_ccp: offline: using the shipped subset $SHIPPED instead (200 pairs, photos" \
         "resized to a shorter side of 256; datasets/README.md)" >&2
    check_shipped
    exit 0
  }
  [ "${PDNN_OFFLINE:-0}" != 1 ] || offline "PDNN_OFFLINE=1: no download"
  command -v curl >/dev/null || die "no curl (scripts/tools/install_deps.sh installs it)"
  src=$tmp/src
  mkdir -p "$src/photos" "$src/annotations/pixel-level"
  # One small file first, so that a machine without internet gives up within seconds.
  curl -fsSL --connect-timeout 10 -o "$src/label_list.mat" "$BASE_URL/label_list.mat" ||
    offline "cannot download $BASE_URL/label_list.mat (no internet?)"
  echo "get_ccp: downloading $(($(wc -l < "$SOURCES") - 1)) files (65 MB) from $BASE_URL"
  awk '$2 != "label_list.mat" {print "url = \"" base "/" $2 "\"\noutput = \"" dir "/" $2 "\""}' \
      base="$BASE_URL" dir="$src" "$SOURCES" > "$tmp/curl.cfg"
  curl -fsSL --no-progress-meter --connect-timeout 10 --retry 3 --parallel --parallel-max 8 -K "$tmp/curl.cfg" ||
    die "download from $BASE_URL failed part way (run again; the shipped subset is $SHIPPED)"
fi
[ -d "$src" ] || die "$src: no such folder"
echo "get_ccp: checking $(wc -l < "$SOURCES") files of $src against $SOURCES"
(cd "$src" && sha256sum --quiet --strict -c "$OLDPWD/$SOURCES") ||
  die "$src: files differ from $SOURCES (above): not the repository's files at $COMMIT"

args=(--src "$src" --out "$tmp/out")
[ "$short" = 0 ] || args+=(--short-side "$short")
"$PY" datasets/ccp_convert.py "${args[@]}"
touch "$tmp/out/$MARK"
chmod 755 "$tmp/out"
rm -rf "$out"
mv "$tmp/out" "$out"
echo "get_ccp: data: $out ($(wc -l < "$out/train.txt") train, $(wc -l < "$out/test.txt") test pairs;" \
     "label sets masks/ (person) and masks59/ (59 classes))"
