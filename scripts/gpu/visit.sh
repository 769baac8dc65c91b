#!/usr/bin/env bash
# scripts/gpu/visit.sh NAME...: on a lent GPU host, runs the named runners
# (scripts/gpu/runners/NAME.sh, in order; each gets RESULTS=<results>/NAME and writes its log
# there) and packs everything they wrote into $OUT/visit.tar.gz (OUT: the device tool's return
# folder; without one, ./gpu-visit.tar.gz; a later visit in the same command: visit-2.tar.gz, ...,
# since the device tool does not bring back folders as deep as a runner's logs). A runner that
# fails is reported and the next runs.
# Knobs the runners read (BIN, PYTHON, STEPS, SEEDS, ...) pass through the environment; see
# scripts/gpu/README.md. Example, through the device tool:
#   scripts/gpu/visit.sh conv torch-conv
#   VISIT_RESULTS=results/gpu-run scripts/gpu/visit.sh bench   (default: a temporary folder)
set -uo pipefail
cd "$(dirname "$0")/../.."
runners=scripts/gpu/runners
if [ $# -eq 0 ]; then
  echo "usage: $0 NAME...   (NAME: $(ls $runners | sed 's/\.sh$//' | tr '\n' ' '))" >&2
  exit 2
fi
for name in "$@"; do
  [ -f "$runners/$name.sh" ] || { echo "visit.sh: no runner $runners/$name.sh" >&2; exit 2; }
done
dest=${OUT:-.}
tarball=$dest/$([ -n "${OUT:-}" ] && echo visit.tar.gz || echo gpu-visit.tar.gz)
# A second visit in the same command keeps the first's tarball: visit-2.tar.gz, ...
first=${tarball%.tar.gz}
for k in 2 3 4 5 6 7 8 9; do
  [ -e "$tarball" ] || break
  tarball=$first-$k.tar.gz
done
[ -d "$dest" ] || { echo "visit.sh: OUT=$dest is not a folder" >&2; exit 2; }
results=${VISIT_RESULTS:-$(mktemp -d)}
mkdir -p "$results"
unset OUT  # the runners' output folder is RESULTS; OUT is only this script's return folder
{
  echo "visit: $(date -u +%Y-%m-%dT%H:%M:%SZ) $(hostname) runners: $*"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 || true
  echo "CPU: $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  git log -1 --format='tree rev %h %s (the host copy'"'"'s git: may be older than the files)' 2>/dev/null || true
  for b in gpu-bundle*/REVISION; do [ -f "$b" ] && echo "bundle $(dirname "$b"): built at $(cat "$b")"; done
} | tee "$results/visit.txt"
failed=()
for name in "$@"; do
  mkdir -p "$results/$name"
  start=$SECONDS
  echo "== visit: $name" | tee -a "$results/visit.txt"
  if RESULTS="$results/$name" bash "$runners/$name.sh" 2>&1 | tee "$results/$name/$name.log"; then
    echo "== visit: $name done in $((SECONDS - start)) s" | tee -a "$results/visit.txt"
  else
    failed+=("$name")
    echo "== visit: $name FAILED after $((SECONDS - start)) s" | tee -a "$results/visit.txt"
  fi
done
tmp="$tarball.tmp.$$"
tar -C "$results" -czf "$tmp" . && mv "$tmp" "$tarball"
echo "visit: $(du -h "$tarball" | cut -f1) in $tarball${failed:+; failed: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]
