#!/usr/bin/env bash
# unet-memory: issue 35's study on a lent host: the U-Net of the segment app (base 64, depth 4,
# no BatchNorm, 2 classes, per-pixel softmax cross-entropy, Adam 1e-3) at batch 1 at growing
# sides, trained past the GPU's memory by pdnn's plan (swapping, recomputation) beside
# PyTorch's tools on the same network (results/scale/unet-batch1-bound.md: the bound).
# Prepare (datasets/ccp-200 travels in the tree; the runs read 9 of its pairs):
#   BINS="segment" DATA= scripts/gpu/prepare.sh
# Then, through the device tool with carry ["gpu-bundle"]: scripts/gpu/visit.sh unet-memory
# PARTS (default "pdnn torch table"; at the study's sides one part a visit, the device tool's
# command at most 10 minutes):
#   pdnn   the segment app at each side of SIDES (multiples of 16), uncapped and under each of
#          the side's caps in CAPS ("side:cap+cap ...", like memory.sh's TABLE_PLAN; a side
#          not named there runs uncapped only), --steps STEPS --memory-plan
#          --conv-algo-cache none --overlays 0, each run in its own process within
#          PDNN_TIMEOUT; a configuration (uncapped, or a cap value) that does not fit, runs out
#          of memory, fails or times out at a side is not run at the larger ones
#          (scripts/bench/bench_memory.sh APP=segment: the rows' predicted_ms and planned_gib
#          are the plan's step and peak, plan its "memory plan applied" choices)
#          -> $RESULTS/unet_memory.csv, memory_logs/pdnn_<side>_<cap>.log
#   torch  the twin at TORCH_SIDES (scripts/twins/torch_memory_bench.py --model unet: plain,
#          save_on_cpu, checkpoint around each level's two-conv block, checkpoint+save_on_cpu),
#          each (variant, side) a fresh process within TORCH_TIMEOUT, TORCH_STEPS timed steps
#          after 2 warm-up ones; a variant that fails stops there -> the same CSV,
#          torch_memory.log
#   table  scripts/report/memory_table.py and plot_memory.py --vs-side over the CSV and
#          TABLE_CSVS (those of earlier visits, read first) -> unet_memory_table.md, .csv,
#          unet_memory.png (matplotlib). Also here, on the tarballs' CSVs:
#          PYTHON=/usr/bin/python3 PARTS=table TABLE_CSVS="a.csv b.csv" scripts/gpu/runners/unet-memory.sh
# Knobs: SIDES ("1024 2048 3072"), CAPS ("1024:3.3G+4.8G 2048:12.2G+21G 3072:18.3G+35.4G":
# PyTorch's peaks on an H200 (save_on_cpu, checkpoint or plain; results/scale/unet-study-h200),
# so that pdnn runs in what each PyTorch tool held, its CUDA context included; the plan's
# smallest limits for an H200, with offloads that wait for their copies where the overlap does
# not fit, each output held to its last use: 2.4/6.3/12.9/22.1/33.9/48.3 GiB at
# 1024/2048/3072/4096/5120/6144), TORCH_SIDES
# ("1024 2048 3072"), BATCH (1; 4 for the batch-4 table: the same pixels at half the side),
# PRECISION (fp32, TF32 off; tf32; bf16: autocast + channels_last in the twin), STEPS (20:
# pdnn's first block of 10 times the algorithms and is left out, the second is the measure; 12
# makes it a block of 2), TORCH_STEPS (3), PDNN_TIMEOUT (240 s), TORCH_TIMEOUT (150 s),
# TORCH_BENCHMARK_LIMIT (cuDNN's autotuner's algorithms per shape; PyTorch's default),
# TORCH_CUDNN_BENCHMARK (on; off: PyTorch's default, cuDNN's heuristics: the autotuner took
# 37-43 s of warm-up a variant at 1024 and 130-141 s at 2048 on an H200, and with a limit of 1
# it picked algorithms 2-8x slower), TORCH_WARMUP (2), TORCH_VARIANTS (all four),
# APP_ARGS (more segment flags), LAYER_TIMES_SIDE (a side that fits uncapped, e.g. 2048:
# bench_memory.sh profiles the U-Net there first, uncapped and with --least-workspace, and every
# pdnn run's plan takes its layer times from those profiles, scaled to its own side (the
# second's where its workspace leaves a layer's faster algorithms out; LAYER_TIMES_MID, e.g. 2G:
# a third with the workspace held to that, whose times hold where a plan's workspace holds as
# much, scaled to its side; and one of the implicit GEMM, whose times the plans take for the
# convolutions whose images pass 2^31 elements at their side, from 5793 x 5793 at 64 channels:
# LAYER_TIMES_WIDE=0 leaves it out); without it the plans' times come from
# FLOPs at an assumed 25,000 GFLOP/s, 23-35% over the H200's steps), BUDGET (540 s, 0: none: the runner's parts together, counted
# from its start; the device tool kills a command at 600 s, or earlier when the session's
# device time is short, and with it every row not yet packed: keep BUDGET under the call's
# limit; a run still going at the budget's end is killed, status "budget", and none is started
# after it, "skipped: budget"; a second runner in the same visit: give each its share).
# Minutes on an H200, measured 2026-11-28: pdnn's uncapped step 122 ms at 1024, 479 ms at
# 2048, 1,986 ms at 4096 (under 130G); a pdnn run is ~10-15 s of start, plan and algorithm
# timing, then STEPS steps: 1024-3072 with their caps took 78 s. PyTorch with the autotuner:
# 37-43 s of warm-up a variant at 1024, 130-141 s at 2048 (the four variants at 1024 and two at
# 2048 filled a 560 s call); with it off, seconds.
# Visits for the study (batch 1, fp32), each one command of the device tool; measured on an
# H200 (results/scale/unet-study-h200/README.md): PyTorch at its default (the autotuner off)
# took 25.7 s a plain step at 5120 and did not finish one at 6144 in 115 s; pdnn 3.4 s at 5120
# (under 93.2G), 7.2 s at 7168 (under 137G, one timed block with STEPS=12, ~175 s a run).
#   PARTS=torch TORCH_CUDNN_BENCHMARK=off TORCH_SIDES="6144" TORCH_STEPS=1 TORCH_WARMUP=1 TORCH_TIMEOUT=500
#   PARTS=torch TORCH_CUDNN_BENCHMARK=off TORCH_SIDES="6144 7168" TORCH_VARIANTS=checkpoint+save_on_cpu TORCH_STEPS=1 TORCH_WARMUP=1
#   PARTS=pdnn LAYER_TIMES_SIDE=2048 UNCAPPED=0 STEPS=12 SIDES="1024 3072 5120" CAPS="1024:3.3G 3072:18.3G 5120:43G"
#   PARTS=pdnn SIDES="6144 7168" CAPS="6144:137G 7168:137G" UNCAPPED=0 STEPS=12 PDNN_TIMEOUT=300
#   BATCH=4 PARTS=pdnn SIDES="512 1024 1536" CAPS="512:1.8G+2.9G 1024:3.2G+10G 1536:6G+22G"
#   BATCH=4 PARTS=torch TORCH_SIDES="512 1024 1536"
# (batch 4 at side S has batch 1's pixels at 2S and the same uncapped peak, but micro-batches
# lower its smallest limit: the CPU plan's 0.94/2.41/4.87 GiB at 512/1024/1536.)
# then the table here over the tarballs' CSVs (above). Without a cap, pdnn plans a step that
# may not fit the device (its convolutions' columns: 203 GiB at 3072) under 98% of it.
set -uo pipefail
source "$(dirname "$0")/../host.sh"
BUDGET=${BUDGET:-540}
left() { local l=$((BUDGET - SECONDS)); [ "$BUDGET" = 0 ] && l=0 || [ $l -ge 1 ] || l=1; echo $l; }
PARTS=${PARTS:-pdnn torch table}
for part in $PARTS; do
  case $part in pdnn|torch|table) ;; *) echo "unet-memory: unknown part $part (pdnn, torch, table)" >&2; exit 2 ;; esac
done
has() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
csv=$RESULTS/unet_memory.csv
BATCH=${BATCH:-1}
PRECISION=${PRECISION:-fp32}

if has pdnn; then
  need_bin segment || exit 1
  sides=${SIDES:-1024 2048 3072}
  plan=${CAPS-1024:3.3G+4.8G 2048:12.2G+21G 3072:18.3G+35.4G}
  stage "pdnn: the U-Net at $sides, batch $BATCH, $PRECISION, caps $plan"
  BIN=$BIN APP=segment BATCH=$BATCH PRECISION=$PRECISION SIDES="$sides" CAPS= PLAN="$plan" \
    STEPS=${STEPS:-20} TORCH=0 BUDGET=$(left) \
    PDNN_TIMEOUT=${PDNN_TIMEOUT:-240} OUT="$csv" scripts/bench/bench_memory.sh 2>&1 | grep --line-buffered -v "^epoch"
fi

if has torch; then  # each variant's line printed as it ends
  sides=${TORCH_SIDES:-1024 2048 3072}
  stage "PyTorch: the U-Net at $sides, batch $BATCH, $PRECISION"
  py scripts/twins/torch_memory_bench.py --model unet --batch "$BATCH" --precision "$PRECISION" \
    --sides "$(echo $sides | tr ' ' ',')" --steps "${TORCH_STEPS:-3}" --timeout "${TORCH_TIMEOUT:-150}" \
    --budget "$(left)" \
    ${TORCH_BENCHMARK_LIMIT:+--benchmark-limit "$TORCH_BENCHMARK_LIMIT"} \
    ${TORCH_CUDNN_BENCHMARK:+--cudnn-benchmark "$TORCH_CUDNN_BENCHMARK"} \
    ${TORCH_WARMUP:+--warmup "$TORCH_WARMUP"} ${TORCH_VARIANTS:+--variants "$TORCH_VARIANTS"} --out "$csv" 2>&1 |
    tee -a "$RESULTS/torch_memory.log"
fi

if has table; then
  stage "table"
  inputs=(${TABLE_CSVS:-})
  [ -f "$csv" ] && inputs+=("$csv")
  [ ${#inputs[@]} -gt 0 ] || { echo "unet-memory: no CSV for the table ($csv, TABLE_CSVS)" >&2; exit 1; }
  py scripts/report/memory_table.py "${inputs[@]}" --out "$RESULTS/unet_memory_table.md"
  py scripts/report/plot_memory.py "${inputs[@]}" --vs-side --out "$RESULTS/unet_memory.png" ||
    echo "unet-memory: no plot (matplotlib?)"
fi
