#!/usr/bin/env bash
# 16th session, call 7 (the last): the submitted code, 42c2f01. (1) the GPU tests of what
# changed; (2) issue 32: W5's step against main 3fffa31, bf16/TF32, own/auto, alternating;
# PyTorch's W5 (autocast bf16 + channels_last, and TF32; CUDA graph) in the same command;
# (3) issue 34: pdnn's U-Net seed 5, whose loss jumped at epoch 10 in call 2 (0.279 -> 0.396,
# Dice 0.80 -> 0.07): twice under auto with the same cache (the same run twice: bit-identical
# CSVs expected), then with every convolution on cuDNN, then on pdnn's own kernels.
# Prepare: BINS="dcgan pdnn_tests segment" DATA= BUNDLE=gpu-bundle-new scripts/gpu/prepare.sh
# (at 42c2f01); gpu-bundle-before2 = main 3fffa31 (dcgan, bin only);
# carry ["gpu-bundle-new","gpu-bundle-before2","gpu-bundle-cmd","datasets/caltech-w4sub"]
set -u
export BUNDLE=gpu-bundle-new
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf ~/.cache/pdnn
source scripts/gpu/host.sh >/dev/null 2>&1
echo "== tests $(el)s"
FILTER='Bf16Gpu.*:ConvGpu.Bf16*:ConvGpu.EveryAlgorithm*:ConvGpuPasses.*:BatchNorm2d.*:*Backends*:Dcgan.*:ConvTranspose2d*:UNetGpu*' \
  VISIT_RESULTS=$OUT/v1 timeout 150 scripts/gpu/visit.sh tests 2>&1 | tail -1
grep -E '^\[  (PASSED|FAILED)|^\[  FAILED|Failure' $OUT/v1/tests/tests.log | head -20
echo "== ab-steps W5 $(el)s"
BEFORE=gpu-bundle-before2 WORKLOADS="W5" PRECISIONS="bf16 tf32" POLICIES="own auto" ROUNDS=2 \
  W5_ARGS="--data datasets/caltech-w4sub --conv-algo-cache none" W5_IMAGES=960 VISIT_RESULTS=$OUT/v2 \
  timeout 150 scripts/gpu/visit.sh ab-steps 2>&1 | tail -6
mkdir -p $OUT/k
echo "== PyTorch W5 $(el)s"
timeout 100 env -u LD_LIBRARY_PATH "$PYTHON" scripts/twins/torch_gpu_bench.py --workloads W5 \
  --modes graph,eager --precisions bf16,tf32 --steps 100 --out $OUT/k/torch_w5.csv > $OUT/k/torch_w5.log 2>&1; echo rc=$?
tail -8 $OUT/k/torch_w5.log
echo "== U-Net seed 5 $(el)s"
for v in auto1:auto auto2:auto cudnn:cudnn own:own; do
  name=${v%%:*} algo=${v#*:}
  timeout 60 $BIN/segment --device cuda --data datasets/ccp-200 --size 128 --base 64 --depth 4 \
    --batch 4 --threads 8 --epochs 30 --seed 5 --conv-algo $algo --overlays 0 \
    --conv-algo-cache $OUT/k/algorithms_$algo.tsv --out $OUT/k/unet_s5_$name.csv > $OUT/k/unet_s5_$name.log 2>&1
  echo "$name rc=$? $(py -c "
import csv
r=list(csv.DictReader(open('$OUT/k/unet_s5_$name.csv')))
print('loss', ' '.join(x['train_loss'][:5] for x in r)); print('   dice', ' '.join(x['test_dice_person'][:4] for x in r))" 2>&1)"
done
py -c "
import csv
cols = ['epoch', 'train_loss', 'train_pixel_acc', 'test_loss', 'test_dice_person', 'test_mean_dice']
a, b = ([[r[c] for c in cols] for r in csv.DictReader(open('$OUT/k/unet_s5_%s.csv' % n))] for n in ('auto1', 'auto2'))
print('auto1 and auto2:', 'identical' if a == b else 'DIFFER at epochs ' + str([x[0] for x, y in zip(a, b) if x != y][:5]))"
echo "== end $(el)s"
