#!/usr/bin/env bash
# scripts/gpu/oldskip.sh [BUILD]: here, after prepare.sh built BUILD (default build-gpu): builds
# BUILD/bin/pdnn_tests_oldskip, the test binary with the bug of 01ac16f..848cf59 put back (a
# layer whose backward-weights chose im2col while its backward-data chose another algorithm ran
# no weight gradient), so that a visit can show that the tests of issue 25 fail on it
# (runners/conv-check.sh runs it when it is in the bundle). The source is restored afterwards.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-gpu}
src=lib/ops/conv/conv2d.cpp
good='  if (want_w) pass(aw, ws_w(aw), true, false, false);'
bad='  if (want_w \&\& (!dx || aw != ConvAlgo::Im2col)) pass(aw, ws_w(aw), true, false, false);'
grep -qF "$good" "$src" || { echo "oldskip.sh: $src no longer has the line to break" >&2; exit 1; }
cp "$src" "$src.oldskip-backup"
trap 'mv "$src.oldskip-backup" "$src"; touch "$src"' EXIT
sed -i "s/^$(printf '%s' "$good" | sed 's/[][\.*^$/]/\\&/g')\$/$bad/" "$src"
grep -q 'aw != ConvAlgo::Im2col)) pass' "$src" || { echo "oldskip.sh: the patch did not apply" >&2; exit 1; }
cmake --build "$build" -j "$(nproc)" --target pdnn_tests >/dev/null
cp "$build/bin/pdnn_tests" "$build/bin/pdnn_tests_oldskip"
mv "$src.oldskip-backup" "$src"
trap - EXIT
touch "$src"  # newer than the patched object, so the rebuild below recompiles it
cmake --build "$build" -j "$(nproc)" --target pdnn_tests >/dev/null
echo "oldskip.sh: $build/bin/pdnn_tests_oldskip built (the weight-gradient skip put back)"
