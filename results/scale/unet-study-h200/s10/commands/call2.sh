#!/usr/bin/env bash
# 18th session, call G (issue 35): 7168 under 137G at main a69d890 (the planner of 9d50450, the
# col2im fix of a61fe30); last measured at an older planner (s2: 7,190.1 ms). 5792 at a69d890
# took 237 s in call B; 7168 has 1.53x its pixels.
# Bundle: gpu-bundle-next; carry ["gpu-bundle-next","gpu-bundle-cmd"]; park results/ and datasets/caltech101-6.
set -u
export BUNDLE=gpu-bundle-next
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
APP_ARGS="--conv-transforms" PARTS=pdnn LAYER_TIMES_SIDE=2048 LAYER_TIMES_MID=2G UNCAPPED=0 \
  SIDES="7168" CAPS="7168:137G" STEPS=3 PDNN_TIMEOUT=${PDNN_TIMEOUT:-480} \
  BUDGET=${BUDGET:-560} VISIT_RESULTS=$OUT/v1 timeout ${LIMIT:-580} scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn|done"
echo "== end $(el)s"
