#!/usr/bin/env bash
# memory: training past the GPU's memory (issues 18, 26) on a lent host.
# Prepare: DATA= BINS="caltech101 pdnn_tests" scripts/gpu/prepare.sh (the photos travel in the
# tree). PARTS (default "tests bench"; each part and PLAN item a few minutes, so that one
# command of the device tool stays under 10: run them as separate visits):
#   tests     the memory plan's GPU tests (MemoryPlan*: the measured peak within 3% of the
#             plan's under several caps, no out of memory under a cap the plan accepts,
#             offloaded optimizer state bit-identical to the device's update (streamed and on
#             the host, in a CUDA graph and eagerly), micro-batch gradients within their
#             bound, dy masked in place changing no bit), the optimizers' CPU-GPU parity (now
#             bit for bit) and the max-pool parity (one-byte argmax, argmax found again)
#             -> $RESULTS/tests.log (about 2 minutes)
#   bench     scripts/bench/bench_memory.sh for each PLAN item "side:cap+cap" (W4 per side,
#             uncapped and under each cap, beside PyTorch plain / save_on_cpu / checkpoint)
#             -> $RESULTS/memory_r2.csv, memory_logs/, memory_table.md (scripts/report/memory_table.py)
#   table     the whole table in one command (issue 33): W4 at TABLE_SIDES (224 448 672 896
#             1120 1344), pdnn uncapped and under the side's cap in TABLE_PLAN (224:2G 448:8G
#             672:20G 896:40G 1120:77G 1344:77G), then PyTorch plain / save_on_cpu / checkpoint,
#             each run in a fresh process within PDNN_TIMEOUT (120 s) / TORCH_TIMEOUT (90 s);
#             a configuration that ran out of memory, did not fit or timed out at a side is not
#             run at the larger ones. Steady-state steps: pdnn times the blocks after the one
#             that times the algorithms, PyTorch the steps after 2 warm-up ones (cuDNN's
#             autotuner). -> $RESULTS/memory_r2.csv, memory_logs/, memory_table.md
#             (on an H100, 2026-11-28: pdnn's 12 runs 215 s, PyTorch's 18 ~10 min by the 10 it
#             finished in 323 s: not yet one command of the device tool, see
#             results/scale/memory-table-h100/one-command-try-2026-11-28/)
#   torch     PyTorch alone at TORCH_SIDES (1120): plain, save_on_cpu, checkpoint
#             -> $RESULTS/memory_r2.csv, torch_memory.log (a line per variant as it ends)
#   accuracy  ACC_EPOCHS (30) epochs of W4 at ACC_SIDE (448) under ACC_CAP (10G), seed 1, the
#             plan carried out (448 does not fit 10G uncapped) -> $RESULTS/accuracy/
#             pdnn-cuda_caltech9-448px-cap10G_s1.csv and its log (about 4 minutes); plot it
#             beside the 224 curve with scripts/report/plot_memory_accuracy.py
# Knobs: PLAN ("672:20G"), TORCH_STEPS (3), TORCH (1), TORCH_BENCHMARK_LIMIT (cuDNN's autotuner's
# algorithms per shape in the twin; PyTorch's default), TORCH_CUDNN_BENCHMARK (on; off: PyTorch's
# own default, no autotuner warm-up, which was what kept the table from one command), TORCH_WARMUP,
# STEPS (20), ACC_SIDE, ACC_CAP,
# ACC_EPOCHS, APP_ARGS (more caltech101 flags for the bench runs).
# The issue's proofs, one visit each:
#   PARTS=tests                                   (the GPU tests)
#   PARTS=bench PLAN="224:2G+3G 448:8G+10G"       (small sides, caps below the uncapped peaks)
#   PARTS=bench PLAN="672:20G+27G"                (672 under 20G vs uncapped and PyTorch)
#   PARTS=bench PLAN="896:40G" TORCH_STEPS=3
#   PARTS=bench PLAN="1120:77G" TORCH_STEPS=3     (1120 on one 80 GB H100 vs PyTorch checkpoint)
#   PARTS=bench PLAN="1344:77G" TORCH_STEPS=2     (1344: every PyTorch variant runs out of memory)
#   PARTS=accuracy
set -uo pipefail
source "$(dirname "$0")/../host.sh"
need_bin caltech101 || exit 1
PARTS=${PARTS:-tests bench}
for part in $PARTS; do
  case $part in tests|bench|table|torch|accuracy) ;; *) echo "memory: unknown part $part (tests, bench, table, torch, accuracy)" >&2; exit 2 ;; esac
done
has() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
DATA=${DATA:-datasets/caltech101-6}

if has tests && [ -x "$BIN/pdnn_tests" ]; then
  stage "memory plan, optimizer and pooling GPU tests"
  "$BIN/pdnn_tests" --gtest_filter='MemoryPlan*:Optim.*:MaxPool2d.*:AllOps/Backends.CudaMatchesCpu/MaxPool*:AllOps/Backends.CudaMatchesCpu/SGD*:AllOps/Backends.CudaMatchesCpu/Ada*:AllOps/Backends.CudaMatchesCpu/TrainStep_caltech9*' \
    > "$RESULTS/tests.log" 2>&1
  grep -E "^\[  (PASSED|FAILED)|SKIPPED \]|Failure|\[ info \]" "$RESULTS/tests.log" | head -40
fi

if has bench; then
  for item in ${PLAN:-672:20G}; do  # APP_ARGS passes through to bench_memory.sh
    side=${item%%:*}
    caps=$(echo "${item#*:}" | tr '+' ' ')
    stage "W4 at ${side}x$side, caps $caps"
    BIN=$BIN PYTHON=$PYTHON SIDES=$side CAPS="$caps" TORCH_STEPS=${TORCH_STEPS:-3} \
      TORCH=${TORCH:-1} STEPS=${STEPS:-20} OUT="$RESULTS/memory_r2.csv" \
      scripts/bench/bench_memory.sh 2>&1 | grep --line-buffered -v "^epoch"
  done
  [ -f "$RESULTS/memory_r2.csv" ] && py scripts/report/memory_table.py "$RESULTS/memory_r2.csv"
fi

if has table; then
  sides=${TABLE_SIDES:-224 448 672 896 1120 1344}
  stage "the memory table: W4 at $sides"
  BIN=$BIN PYTHON=$PYTHON SIDES="$sides" CAPS= PLAN="${TABLE_PLAN:-224:2G 448:8G 672:20G 896:40G 1120:77G 1344:77G}" \
    STEPS=${STEPS:-20} TORCH_STEPS=${TORCH_STEPS:-3} TORCH=${TORCH:-1} PDNN_TIMEOUT=${PDNN_TIMEOUT:-120} \
    TORCH_TIMEOUT=${TORCH_TIMEOUT:-90} OUT="$RESULTS/memory_r2.csv" scripts/bench/bench_memory.sh 2>&1 | grep --line-buffered -v "^epoch"
  stage "table"
  [ -f "$RESULTS/memory_r2.csv" ] && py scripts/report/memory_table.py "$RESULTS/memory_r2.csv"
fi

if has torch; then  # PyTorch alone (TORCH_SIDES), each variant's line printed as it ends
  stage "PyTorch plain / save_on_cpu / checkpoint at ${TORCH_SIDES:-1120}"
  env -u LD_LIBRARY_PATH "$PYTHON" scripts/twins/torch_memory_bench.py \
    --sides "$(echo ${TORCH_SIDES:-1120} | tr ' ' ',')" --steps "${TORCH_STEPS:-3}" --timeout "${TORCH_TIMEOUT:-0}" \
    ${TORCH_BENCHMARK_LIMIT:+--benchmark-limit "$TORCH_BENCHMARK_LIMIT"} \
    ${TORCH_CUDNN_BENCHMARK:+--cudnn-benchmark "$TORCH_CUDNN_BENCHMARK"} ${TORCH_WARMUP:+--warmup "$TORCH_WARMUP"} \
    --out "$RESULTS/memory_r2.csv" 2>&1 | tee "$RESULTS/torch_memory.log"
fi

if has accuracy; then
  side=${ACC_SIDE:-448}
  cap=${ACC_CAP:-10G}
  epochs=${ACC_EPOCHS:-30}
  mkdir -p "$RESULTS/accuracy"
  out="$RESULTS/accuracy/pdnn-cuda_caltech9-${side}px-cap${cap}_s1.csv"
  stage "W4 at ${side}x$side under $cap, $epochs epochs"
  rm -f "$out"
  "$BIN/caltech101" --device cuda --data "$DATA" --size "$side" --epochs "$epochs" --seed 1 \
    --gpu-memory-limit "$cap" --memory-plan --out "$out" \
    --confusion "$RESULTS/accuracy/confusion_${side}px_cap${cap}.png" > "$RESULTS/accuracy/${side}px_cap${cap}.log" 2>&1
  echo "rc $?"
  grep -E "^memory plan applied|^epoch|error|CUDA context|peak device" "$RESULTS/accuracy/${side}px_cap${cap}.log" | tail -8
fi
