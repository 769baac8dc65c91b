#!/usr/bin/env bash
# 19th session, call B (issue 32): W4 at 672 x 672 uncapped in bf16, pdnn against PyTorch 2.11's
# autocast + channels_last (plain, cuDNN's autotuner on, a fresh process) in one command: the
# target is pdnn >= 1.2x PyTorch's. Then TF32 at 672 both sides (pdnn auto; PyTorch TF32).
# Bundle: gpu-bundle-next; carry ["gpu-bundle-next","gpu-bundle-cmd","datasets/caltech-w4sub"];
# park results/, datasets/caltech101-6 and datasets/ccp-200.
set -u
export BUNDLE=gpu-bundle-next
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf ~/.cache/pdnn
source scripts/gpu/host.sh >/dev/null 2>&1
mkdir -p $OUT/k
for prec in bf16 tf32; do
  timeout 150 $BIN/caltech101 --device cuda --threads 8 --size 672 --precision $prec --steps 24 \
    --data datasets/caltech-w4sub --images-per-epoch 448 --conv-algo-cache none \
    --bench-csv $OUT/k/steps.csv > $OUT/k/pdnn_672_$prec.log 2>&1
  echo "pdnn $prec 672 rc=$?: $(grep -m1 '^step_ms' $OUT/k/pdnn_672_$prec.log | cut -c1-160) ($(el)s)"
  timeout 200 python3 scripts/twins/torch_memory_bench.py --model w4 --sides 672 --variants plain \
    --precision $prec --steps 5 --warmup 2 --cudnn-benchmark on --out $OUT/k/torch_672.csv \
    > $OUT/k/torch_672_$prec.log 2>&1
  echo "torch $prec 672 rc=$?: $(tail -1 $OUT/k/torch_672_$prec.log | cut -c1-200) ($(el)s)"
done
tar -czf $OUT/all.tgz -C $OUT k
echo "== end $(el)s"
