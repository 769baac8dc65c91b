#!/usr/bin/env bash
# Session 12, call 5 (bundle a1397ba): the uncapped U-Net at 1024 (transforms, strict): the plan
# as run against what the allocator holds after the run and its peak since the fit.
set -u
for v in transforms strict; do
  args=""; [ $v = transforms ] && args="--conv-transforms"
  APP_ARGS="$args" PARTS=pdnn SIDES="1024" CAPS="" STEPS=12 BUDGET=70 VISIT_RESULTS=$OUT/v_$v \
    timeout 75 scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn"
  grep -h "^memory plan as run\|^peak \|workspace .* -> " $OUT/v_$v/unet-memory/memory_logs/pdnn_*_none.log
done
