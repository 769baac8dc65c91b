#!/usr/bin/env bash
# 18th session, call E (issue 34's refactor target: "W4/W5 step times do not regress, measured
# before and after in one command"): main (gpu-bundle-next, a69d890) against c1cca4d, the code
# before the step shell and the graph model (gpu-bundle-c1cca4d: caltech101 dcgan, bin only;
# ab-steps runs its binaries with the other bundle's env.sh). W4 and W5, fp32 and TF32, auto,
# alternating, 2 rounds, each run without an algorithm cache. The 11th-session H100 A/B had W5
# TF32 at 1.338 from a per-process spread (results/README.md); main has since taken W5 TF32 to
# ~2.85 ms on an H200, so W5 is expected well below c1cca4d's; W4 fp32/TF32 within ~1-2%.
# carry ["gpu-bundle-next","gpu-bundle-c1cca4d","gpu-bundle-cmd","datasets/caltech-w4sub"];
# park results/ and datasets/caltech101-6.
set -u
export BUNDLE=gpu-bundle-next
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
rm -rf ~/.cache/pdnn
BEFORE=gpu-bundle-c1cca4d WORKLOADS="W4 W5" PRECISIONS="fp32 tf32" POLICIES="auto" ROUNDS=2 \
  W4_ARGS="--data datasets/caltech-w4sub --images-per-epoch 448 --conv-algo-cache none" \
  W5_ARGS="--data datasets/caltech-w4sub --conv-algo-cache none" W5_IMAGES=960 \
  VISIT_RESULTS=$OUT/v1 timeout 570 scripts/gpu/visit.sh ab-steps 2>&1 | tail -8
echo "== end $(el)s"
