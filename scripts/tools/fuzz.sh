#!/usr/bin/env bash
# Runs every libFuzzer target of a fuzzing build (make fuzz) for SECONDS each, one after the
# other on one core, from the committed seeds (test/fuzz/corpus/<name>/) plus what earlier runs
# found (<build>/corpus/<name>/, not committed). Crashing inputs land in <build>/crashes/; each
# one found must become a regression input in test/fuzz/regressions/<name>/ (test/fuzz/README.md).
#   scripts/tools/fuzz.sh BUILD_DIR SECONDS
set -euo pipefail
build=${1:?build folder}
seconds=${2:?seconds per target}
cd "$(dirname "$0")/../.."
shopt -s nullglob
targets=("$build"/bin/fuzz_*)
[ ${#targets[@]} -gt 0 ] || { echo "fuzz.sh: no fuzz targets in $build/bin" >&2; exit 1; }
mkdir -p "$build/crashes"
status=0
for bin in "${targets[@]}"; do
  name=$(basename "$bin"); name=${name#fuzz_}
  mkdir -p "$build/corpus/$name"
  log="$build/fuzz_$name.log"
  echo "fuzz: $name for ${seconds}s (log $log)"
  # -timeout: an input taking 10 s is a hang; -rss_limit_mb: one holding 2 GB is a leak or a
  # bomb. Both count as findings, like crashes.
  if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$build/crashes/$name-" "$build/corpus/$name" "test/fuzz/corpus/$name" \
      > "$log" 2>&1; then
    status=1
    echo "fuzz: $name FOUND A PROBLEM: see $log and $build/crashes/" >&2
  fi
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  echo "fuzz: $name: ${runs:-?} executions, coverage ${cov:-?} edges, corpus $(ls "$build/corpus/$name" | wc -l) new inputs"
done
exit $status
