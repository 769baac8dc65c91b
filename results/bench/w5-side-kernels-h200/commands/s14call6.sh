#!/usr/bin/env bash
# Session 14, call 6 (issue 34's accuracy target, first run): the U-Net's test Dice against the
# twin's, 3 seeds, same initial weights and data order (128 px, 30 epochs). Bundle as call 5.
set -u
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
PARTS=accuracy SEEDS="1 2 3" VISIT_RESULTS=$OUT/v1 timeout 262 scripts/gpu/visit.sh segment 2>&1 | tail -25
echo "== end $(el)s"
