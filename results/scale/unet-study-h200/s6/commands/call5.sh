#!/usr/bin/env bash
# Session 13, call 5 (typed as the device tool's command): 5792 under PyTorch plain's 119.8G.
APP_ARGS="--conv-transforms" PARTS=pdnn LAYER_TIMES_SIDE=2048 LAYER_TIMES_MID=2G UNCAPPED=0 SIDES="5792" CAPS="5792:119.8G" STEPS=12 PDNN_TIMEOUT=280 BUDGET=370 VISIT_RESULTS=$OUT/v2 timeout 375 scripts/gpu/visit.sh unet-memory 2>&1 | grep -E "^pdnn|done"; grep -h "^workspace \|^predicted step\|^bench time" $OUT/v2/unet-memory/memory_logs/pdnn_*.log | cut -c1-200
