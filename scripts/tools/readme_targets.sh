#!/usr/bin/env bash
# make check-readme (by hand before a release; not in CI for time): every make target README.md names, in its short
# form, on the CPU, one after the other from this checkout, as a new user would run them; then
# `git status --porcelain` must be what it was before (on CI's clean clone: empty). A user's runs
# go to runs/ (git-ignored) and never change the committed tree (issue 31). A target the README
# names that SHORT below neither runs nor skips with a reason fails the check, so a new target
# cannot be forgotten. Each target's log: runs/check-readme/<target>.log.
# About 5 minutes on 2 cores (out of CI for that: .ci/run).
#   scripts/tools/readme_targets.sh [TARGET [VAR=value...]]...   (default: every README target;
#   variables after a target replace its short form)
# Environment: BUILD (make's, default build; the targets build what they need there).
set -euo pipefail
cd "$(dirname "$0")/../.."

# target -> the make variables of its short form, or "skip: <why>". The short forms are the
# README table's "shorten it" variables, small enough for the budget.
declare -A SHORT=(
  [mnist]='MNIST_ARGS="--epochs 1"'
  [mnist-keras]='MNIST_ARGS="--epochs 1"'
  [fashion-mnist]='MNIST_ARGS="--epochs 1"'
  [mnist-keras-dist]='MNIST_ARGS="--epochs 1" RANKS=2'
  [caltech101]='CALTECH_ARGS="--epochs 1 --images-per-epoch 64"'
  [segment]='SEGMENT_ARGS="--epochs 1"'
  [bench-caltech]='THREADS=1 ROUNDS=1 STEPS=3 PROFILE_STEPS=1 TORCH=0'
  [pi]='THREADS=1 PI_ARGS="--repeat 1 --n 20000000"'
  [hebbian]='HEBBIAN_N=200 HEBBIAN_T=500 HEBBIAN_THREADS=1 NUMPY_MAX_SECONDS=1'
  [scaling]='THREADS=1 STEPS_SMALL=10 STEPS_KERAS=3 PI_REPEAT=1'
  [bench-mnist]='THREADS=1 TORCH=0'
  [bench-conv]='THREADS=1 BENCH_CONV_ARGS="--filter W2 --batch 2 --repeats 1 --warmup 0"'
  [accuracy-mnist]='ACCURACY_WORKLOADS=small-npm10k SEEDS=1'
  [dcgan]='CPU_EPOCHS=1 CPU_IMAGES=128'
  [dcgan-dist]='RANKS=2 EPOCHS=1 DCGAN_ARGS="--images-per-epoch 128"'
  [dcgan-quality]='DATASET=mnist EPOCHS=1 IMAGES_PER_EPOCH=128 SAMPLES=500 CLASSIFIER_EPOCHS=1'
  [bench-dcgan]='THREADS=1 STEPS=3 REPEAT=1 PROFILE_STEPS=3 TORCH=0'
  [plots]=''
  [build]=''
  [check-readme]='skip: this check itself'
  [test]='skip: a test suite (CI runs it)'
  [test-avx2]='skip: a test suite (CI runs it)'
  [test-sanitize]='skip: a test suite (CI runs it)'
  [bench-gpu]='skip: needs a GPU'
  [gpu-bundle]='skip: a CUDA build of its own for a lent GPU host, as long as make test'"'"'s build (every GPU visit makes one)'
  [fuzz]='skip: a fourth build of the library, with clang, over the budget (make test runs every seed and regression input: FuzzCorpus.*)'
)
# What a target needs that a machine may lack and cannot install (not root): said, not failed.
have_torch() { /usr/bin/python3 -c 'import torch' 2>/dev/null; }
can_have() { dpkg -s "$1" >/dev/null 2>&1 || [ "$(id -u)" = 0 ]; }
if ! can_have dataset-fashion-mnist; then
  SHORT[fashion-mnist]='skip: needs the Debian package dataset-fashion-mnist (not root: cannot install it)'
  SHORT[accuracy-mnist]=${SHORT[fashion-mnist]}
elif ! have_torch; then
  SHORT[accuracy-mnist]='skip: needs PyTorch (scripts/tools/install_deps.sh torch)'
fi
# Run after the others: it draws what they wrote. EXTRA: more runs of a target, with their own
# variables (make check-readme READMECHECK="dcgan-quality DATASET=caltech SAMPLES=200" runs the
# README's photo comparison, about a minute more: left out of CI's budget; the test
# DcganApp.DcganQualityOnPhotosTabulatesBothFrameworksOverSeeds runs that script).
LAST=(plots)
EXTRA=()

readme_targets() {
  grep -o 'make [a-z][a-z0-9-]*' README.md | cut -d' ' -f2 | sort -u |
    while read -r t; do grep -q "^$t:" Makefile && echo "$t"; done
}
missing=()
for t in $(readme_targets); do [ -n "${SHORT[$t]+x}" ] || missing+=("$t"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "check-readme: README.md names make ${missing[*]}: give each a short form or a skip" \
       "reason in $0" >&2
  exit 1
fi

runs=()
if [ $# -gt 0 ]; then
  for a in "$@"; do  # a VAR=value word goes with the target before it, replacing its short form
    if [[ "$a" == *=* ]] && [ ${#runs[@]} -gt 0 ]; then runs[-1]+=" $a"; else runs+=("$a"); fi
  done
else
  for t in $(readme_targets); do [[ " ${LAST[*]} " == *" $t "* ]] || runs+=("$t"); done
  runs+=(${EXTRA[@]+"${EXTRA[@]}"} "${LAST[@]}")
fi
logs=runs/check-readme
mkdir -p "$logs"
# CPU seconds (user + system) of every process this script has waited for: beside the wall time,
# a figure that a busy machine does not inflate as much.
# (`times` in this shell, into a file: in a pipeline or $(...) it would count a subshell's.)
cpu_seconds() {
  times > "$logs/.times"
  tail -n 1 "$logs/.times" | awk '{ s = 0; for (i = 1; i <= 2; ++i) { split($i, a, /[ms]/)
                                      s += 60 * a[1] + a[2] }; printf "%.0f", s }'
}
before=$(git status --porcelain)
t0=$SECONDS
for run in "${runs[@]}"; do
  read -r t vars <<<"$run"
  short=${SHORT[$t]-}
  [ -z "$vars" ] || [[ "$short" == skip:* ]] || short=""  # an EXTRA run names its variables
  if [[ "$short" == skip:* ]]; then
    printf 'check-readme: %-22s skipped: %s\n' "$t" "${short#skip: }"
    continue
  fi
  log="$logs/${run// /_}.log"
  cpu_seconds > "$logs/.cpu0"
  start=$SECONDS cpu0=$(cat "$logs/.cpu0")
  if ! eval "make ${BUILD:+BUILD=$BUILD} $t $short $vars" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "check-readme: make $t $short $vars failed after $((SECONDS - start)) s (log $log)" >&2
    exit 1
  fi
  cpu_seconds > "$logs/.cpu1"
  printf 'check-readme: %-22s %4d s (CPU %4d s)  make %s\n' "$t" $((SECONDS - start)) \
         $(($(cat "$logs/.cpu1") - cpu0)) "$t $short $vars"
done
after=$(git status --porcelain)
if [ "$after" != "$before" ]; then
  echo "check-readme: the targets changed the committed tree (git status --porcelain):" >&2
  diff <(echo "$before") <(echo "$after") >&2 || true
  exit 1
fi
cpu_seconds > "$logs/.cpu1"
echo "check-readme: ${#runs[@]} runs in $((SECONDS - t0)) s (CPU $(cat "$logs/.cpu1") s); git status as" \
     "before$([ -z "$before" ] && echo ' (clean)')"
