#!/usr/bin/env bash
# s23 call G (nvidia-h200): the DCGAN's quality on seeds 7-9 in bf16 and in fp32 (issue 32,
# item 5), at the code submitted (3f6cf43's kernels; dcgan and gan_score built from 21fd525 +
# the two kernel changes). Decided before the runs: both precisions run, and the table over
# seeds 1-9 is reported whatever it shows.
set -u
export BUNDLE=gpu-bundle-q23
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
keep() {  # the visit's small files into $OUT/q/$1 (the iteration CSVs as one tar.gz)
  local src=$2 dst=$OUT/q/$1
  mkdir -p "$dst"
  find "$src" -name 'quality_*.csv' -exec cp {} "$dst/" \;
  find "$src" -name 'dcgan_caltech101-6*_s[0-9].csv' -size -300k -exec cp {} "$dst/" \;
  find "$src" -name '*.log' -exec sh -c 'gzip -c "$1" > "$2/$(basename "$1").gz"' _ {} "$dst" \;
  its=$(find "$src" -name '*iter*.csv' -o -name '*iterations*.csv' | head -20)
  [ -n "$its" ] && tar czf "$dst/iterations.tar.gz" $its 2>/dev/null
  g=$(find "$src" -path '*s9*/epoch_300.png' | head -1); [ -n "$g" ] && cp "$g" "$dst/grid_s9_e300.png"
  ls -la "$dst"
}
OUT= PRECISION=bf16 SEEDS="7 8 9" PARTS="pdnn score" VISIT_RESULTS=/tmp/q_bf16 \
  timeout 200 bash scripts/gpu/visit.sh dcgan-quality 2>&1 | tail -8
keep bf16 /tmp/q_bf16
echo "== bf16 $(el)s"
OUT= PRECISION=fp32 SEEDS="7 8 9" PARTS="pdnn score" VISIT_RESULTS=/tmp/q_fp32 \
  timeout 330 bash scripts/gpu/visit.sh dcgan-quality 2>&1 | tail -8
keep fp32 /tmp/q_fp32
echo "== fp32 $(el)s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/q/gpu.txt
cat gpu-bundle-q23/REVISION >> $OUT/q/gpu.txt
