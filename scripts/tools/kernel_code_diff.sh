#!/usr/bin/env bash
# kernel_code_diff.sh REV_A REV_B [FILE.cu] [BUILD]: whether a change alters the machine code of
# a CUDA file's kernels, kernel by kernel, without a GPU. FILE.cu (default
# lib/ops/conv/conv2d_direct.cu) is compiled at both revisions (git worktrees in a temporary
# folder, the same path for both, since the anonymous namespace's name follows the path) with
# BUILD's flags (default build-gpu: its includes and defines, sm_90, -O3, no line info) to PTX
# and to a cubin (ptxas), and each kernel's SASS section is compared byte for byte.
# Why SASS and not PTX: ptxas compiles an unchanged PTX entry differently when another entry of
# the file changed (2026-11-29: a loader refactor left the bf16 weight gradients' PTX as it was
# and moved 147 of their 4,088 instructions), so "the same PTX" does not mean "the same code".
# Prints a line per kernel whose SASS differs (with both sizes), then "same N of M".
set -euo pipefail
a=$1 b=$2 file=${3:-lib/ops/conv/conv2d_direct.cu} build=${4:-build-gpu}
root=$(git rev-parse --show-toplevel)
rsp=$root/$build/CMakeFiles/pdnn.dir/includes_CUDA.rsp
[ -f "$rsp" ] || { echo "kernel_code_diff: no $rsp (configure a CUDA build first: scripts/gpu/prepare.sh makes build-gpu/)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$tmp/src" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
defs=$(sed -n 's/^CUDA_DEFINES = //p' "$root/$build/CMakeFiles/pdnn.dir/flags.make")
for side in a b; do
  rev=${!side}
  git -C "$root" worktree add -f --detach "$tmp/src" "$rev" >/dev/null 2>&1
  # the build's includes, the tree's lib/ in place of the checkout's
  incs=$(sed "s#-I$root/lib#-I$tmp/src/lib#" "$rsp")
  # shellcheck disable=SC2086
  "${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}" $defs $incs -O3 -DNDEBUG -arch=sm_90 --expt-relaxed-constexpr -std=c++17 -cubin \
    -x cu "$tmp/src/$file" -o "$tmp/$side.cubin"
  git -C "$root" worktree remove --force "$tmp/src"
done
python3 - "$tmp/a.cubin" "$tmp/b.cubin" <<'PY'
import re, subprocess, sys
def kernels(path):
    out = subprocess.run(['readelf', '-S', '-W', path], capture_output=True, text=True).stdout
    data = open(path, 'rb').read()
    d = {}
    for line in out.splitlines():
        m = re.search(r'\]\s+(\.text\.\S+)\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)', line)
        if m:
            off, size = int(m.group(2), 16), int(m.group(3), 16)
            d[m.group(1)[len('.text.'):]] = data[off:off + size]
    return d
a, b = kernels(sys.argv[1]), kernels(sys.argv[2])
names = sorted(set(a) | set(b))
for k in names:
    if a.get(k) != b.get(k):
        print('%-8s %s (%d / %d bytes)' % ('differs' if k in a and k in b else 'only in ' + ('b' if k not in a else 'a'),
                                          k, len(a.get(k, b'')), len(b.get(k, b''))))
print('same %d of %d' % (sum(a.get(k) == b.get(k) for k in names), len(names)))
PY
