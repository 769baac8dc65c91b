#!/usr/bin/env bash
# sass: the SASS (the GPU's own instructions, as cuobjdump prints them) of chosen kernels of a
# bundled binary, for instruction diets: this machine's CUDA install has no cuobjdump, the GPU
# host's has. -> $RESULTS/sass_<n>.txt.gz (each kernel whole, its demangled name first) and
# $RESULTS/sass_counts.txt (per kernel: its static instruction count, then the count of each
# opcode, modifiers dropped: HMMA, LDSM, LDGSTS, BAR, ...). Seconds, no GPU time to speak of.
# Prepare: a bundle holding the kernels, e.g. BINS="bench_conv_gpu" DATA= scripts/gpu/prepare.sh
# Knobs: KERNELS (an extended regex matched against the mangled and the demangled names;
# default direct_fwd), FROM (the bundled binary, default bench_conv_gpu), ARCH (sm_90),
# KEEP_ALL=1 (also the binary's whole SASS, sass_all.txt.gz: megabytes).
set -uo pipefail
source "$(dirname "$0")/../host.sh"
FROM=${FROM:-bench_conv_gpu}
need_bin "$FROM" || exit 1
CUOBJDUMP=$(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump /usr/local/cuda-*/bin/cuobjdump 2>/dev/null | head -n1)
[ -n "$CUOBJDUMP" ] || { echo "sass: no cuobjdump on this host" >&2; exit 1; }
FILTER=$(command -v c++filt || echo cat)
stage "SASS of /${KERNELS:-direct_fwd}/ in $FROM (${ARCH:-sm_90})"
all=$RESULTS/sass_all.txt
"$CUOBJDUMP" -sass -arch "${ARCH:-sm_90}" "$BUNDLE/bin/$FROM" > "$all" 2> "$RESULTS/sass.err" ||
  { echo "sass: cuobjdump failed: $(head -c 300 "$RESULTS/sass.err")" >&2; exit 1; }
# Split at each "Function : NAME"; keep the kernels whose mangled or demangled name matches.
# The names are demangled in one pass and only a kept kernel's lines are gathered: one c++filt a
# kernel and every kernel's text gathered outran 60 s on bench_conv_gpu (fifteenth session).
grep -o 'Function : .*' "$all" | awk '{ print $NF }' > "$RESULTS/names.txt"
$FILTER < "$RESULTS/names.txt" > "$RESULTS/pretty.txt"
awk -v re="${KERNELS:-direct_fwd}" -v out="$RESULTS" -v names="$RESULTS/names.txt" \
    -v prettys="$RESULTS/pretty.txt" '
  BEGIN { while ((getline m < names) > 0) { getline p < prettys; dem[m] = p } }
  function flush() {
    if (!keep) return
    ++n; f = out "/sass_" n ".txt"
    print "// " pretty > f; print "// " name > f; printf "%s", body > f; close(f)
    total = 0; delete ops
    m = split(body, lines, "\n")
    for (i = 1; i <= m; ++i)
      if (match(lines[i], /\/\*[0-9a-f]+\*\/[ \t]+(@!?U?P[T0-9]+[ \t]+)?[A-Z][A-Z0-9_.]*/)) {
        s = substr(lines[i], RSTART, RLENGTH); sub(/^.*\*\/[ \t]+(@!?U?P[T0-9]+[ \t]+)?/, "", s)
        sub(/\..*/, "", s); ++ops[s]; ++total
      }
    printf "%d instructions  %s\n", total, pretty >> (out "/sass_counts.txt")
    line = ""; for (o in ops) line = line sprintf(" %s %d", o, ops[o])
    print "   " line >> (out "/sass_counts.txt")
    keep = 0; body = ""
  }
  /Function : / { flush(); name = $NF; pretty = dem[name]; keep = name ~ re || pretty ~ re; next }
  keep { body = body $0 "\n" }
  END { flush(); printf "%d kernel(s) matched\n", n > "/dev/stderr" }
' "$all"
rm -f "$RESULTS/names.txt" "$RESULTS/pretty.txt"
for f in "$RESULTS"/sass_[0-9]*.txt; do [ -e "$f" ] && gzip -f "$f"; done
if [ "${KEEP_ALL:-0}" = 1 ]; then gzip -f "$all"; else rm -f "$all"; fi
[ -s "$RESULTS/sass_counts.txt" ] && sed -n '1~2p' "$RESULTS/sass_counts.txt" | cut -c1-200
