#!/usr/bin/env bash
# bench_memory.sh: issues 18 and 26's table, `make bench-memory` (run it on a machine with a
# GPU and a CUDA build of pdnn): W4 (caltech101 app, batch 64, fp32) at each side in SIDES,
# uncapped and under each cap in CAPS (--gpu-memory-limit), step time (--steps, as
# bench_gpu.sh: CUDA graph on) and the allocator's peak device memory (in use and reserved),
# then PyTorch at the same sides: plain, save_on_cpu(pin_memory=True) and checkpoint
# (scripts/twins/torch_memory_bench.py). PLAN ("224:2G 448:8G+10G ..."): a side's own caps
# instead of CAPS. Every pdnn run prints its --memory-plan; logs go beside the
# CSV (memory_logs/).
# A cap the step cannot fit under stops that run before training with the smallest limit that
# would do: its row says "no-fit <limit>". Under a cap the model carries the plan out (the
# status says whether the step ran as one CUDA graph: "ok graph", or "ok eager"); the row's
# planned_gib is the plan's peak (the CUDA context included), context_gib the context at the
# end, plan what the plan did (micro-batches, optimizer state on the host and how it is
# updated, outputs offloaded and recomputed, pools finding their argmax again). Out of memory
# (the allocator is capped at the limit less the context): "oom".
# Rows: OUT (runs/scale/memory_r2.csv), columns as torch_memory_bench.py's.
# Environment: BIN (build/bin), PYTHON (python3, the one with torch), SIDES ("224 448 672 896
# 1120 1344"), CAPS ("20G"; empty: none), STEPS (20: two blocks of 10), TORCH_STEPS (5), CALTECH_DATA
# (datasets/caltech101-6), OUT, TORCH=0 to skip PyTorch, THREADS (8: the host threads that prepare
# the batches; at 1 they, not the GPU, bound the step), APP_ARGS (more caltech101 flags, e.g.
# "--conv-algo implicit"), UNCAPPED (1; 0 leaves the uncapped run out, e.g. where it cannot fit).
# TORCH_BENCHMARK_LIMIT (PyTorch's default): torch.backends.cudnn.benchmark_limit for the twin;
# TORCH_CUDNN_BENCHMARK (on; off: PyTorch's own default, cuDNN's heuristics, no autotuner
# warm-up), TORCH_WARMUP (2): the twin's --cudnn-benchmark and --warmup.
# PDNN_TIMEOUT / TORCH_TIMEOUT (0: none): seconds one pdnn run / one PyTorch process may take;
# a run past it is killed, status "timeout". Memory grows with the side: once a configuration
# (uncapped, a cap, a PyTorch variant) runs out of memory, does not fit, or times out at a side,
# its larger sides are not run (status "skipped: ..."), which bounds the whole table
# (scripts/gpu/runners/memory.sh PARTS=table; on an H100 about 15 minutes so far, more than one
# 10-minute command of the device tool). One or two
# sides at a time also work, e.g.  make bench-memory SIDES=672 CAPS="20G 28G"
# APP=segment (issue 35): the U-Net instead, the segment app at BATCH (1) with
# --conv-algo-cache none --overlays 0 (rows' app its model name, e.g. unet_b64_d4), then the
# twin with --model unet (its four variants). SEGMENT_DATA: the pair folder the app reads; by
# default one made in a temporary folder of the first 8 training pairs and 1 test pair of
# datasets/ccp-200, since the app decodes every pair to a cache of (8/7 side)^2 RGB pixels (the
# 200 pairs: 13 GB of the host's memory at side 4096, which the swapping needs) and the
# pictures do not change a step's time. Its rows have one column more, predicted_ms (the plan's
# step). planned_gib is the plan's peak for every run (the CUDA context included, which the
# measured peak is not); context_gib the app's end-of-run context, else the plan's ("CUDA
# context (measured)" in its fixed bytes: segment prints no end-of-run line).
# PRECISION (fp32): the app's and the twin's --precision (tf32, bf16). DEVICE (cuda): cpu runs
# pdnn on this machine's CPU, a check of the parsing (no device peak; TORCH=0 with it).
# LAYER_TIMES_SIDE (none): a side that fits uncapped; the app is profiled there first
# (--profile, 12 steps; on a GPU twice, the second with --least-workspace) and every run's plan
# takes its layer times from those profiles (--layer-times and --layer-times-least, scaled to
# its own side) instead of FLOPs at an assumed rate. LAYER_TIMES_MID (none; e.g. 2G): on a GPU
# a third profile with the workspace held to that size there (--workspace-held), whose times
# the plans take where their workspace holds as much, scaled to their side (--layer-times-mid:
# cuDNN's FFT and Winograd fit where im2col's columns do not). On a GPU also a profile of the
# implicit GEMM there (--conv-algo implicit), whose times the plans take for the convolutions
# whose images pass 2^31 elements at their side (--layer-times-wide: the U-Net's full
# resolution from 5793 x 5793, which only the implicit GEMM's 64-bit kernels run; LAYER_TIMES_WIDE=0
# leaves it out).
# BUDGET (0: none): seconds the pdnn runs may take together (a GPU visit's command is killed at
# 10 minutes, its unpacked rows with it): a run still going when they end is killed, status
# "budget", and the runs after it are not started, status "skipped: budget".
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-build/bin}
PYTHON=${PYTHON:-python3}
SIDES=${SIDES:-224 448 672 896 1120 1344}
CAPS=${CAPS-20G}  # empty: no cap but those PLAN gives
STEPS=${STEPS:-20}
TORCH_STEPS=${TORCH_STEPS:-5}
CALTECH_DATA=${CALTECH_DATA:-datasets/caltech101-6}
OUT=${OUT:-runs/scale/memory_r2.csv}
TORCH=${TORCH:-1}
APP=${APP:-caltech101}
PRECISION=${PRECISION:-fp32}
COLUMNS="app,framework,variant,side,batch,precision,gpu_memory_limit_gib,peak_gib,peak_reserved_gib,median_ms,min_ms,max_ms,steps,status,planned_gib,context_gib,plan,gpu,versions,git_rev,host,timestamp"
[ -x "$BIN/$APP" ] || { echo "bench_memory: no $BIN/$APP (build first)" >&2; exit 1; }
logs="$(dirname "$OUT")/memory_logs"
mkdir -p "$logs"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case $APP in
  caltech101)
    [ -d "$CALTECH_DATA" ] || { echo "bench_memory: no $CALTECH_DATA (datasets/get_caltech101.sh)" >&2; exit 1; }
    name=caltech9 batch=64 torch_args=()
    app_args=(--data "$CALTECH_DATA" --threads "${THREADS:-8}") ;;
  segment)
    name=unet batch=${BATCH:-1} torch_args=(--model unet --batch "$batch")
    COLUMNS="$COLUMNS,predicted_ms"
    if [ -z "${SEGMENT_DATA:-}" ]; then  # 8 training pairs and 1 test pair (the header says why)
      SEGMENT_DATA=$tmp/ccp-steps
      src=$(cd datasets/ccp-200 && pwd)
      mkdir -p "$SEGMENT_DATA"
      for f in images masks masks59; do ln -sfn "$src/$f" "$SEGMENT_DATA/$f"; done
      head -8 "$src/train.txt" > "$SEGMENT_DATA/train.txt"
      head -1 "$src/test.txt" > "$SEGMENT_DATA/test.txt"
    fi
    app_args=(--data "$SEGMENT_DATA" --batch "$batch" --conv-algo-cache none --overlays 0) ;;
  *) echo "bench_memory: APP=$APP: caltech101 or segment" >&2; exit 2 ;;
esac
[ "$PRECISION" = fp32 ] || { app_args+=(--precision "$PRECISION"); torch_args+=(--precision "$PRECISION"); }
if [ -n "${LAYER_TIMES_SIDE:-}" ]; then  # every plan's layer times from measured profiles
  profile() {  # CSV [flags]: the app profiled at LAYER_TIMES_SIDE
    local csv=$1; shift
    timeout -k 10 "${PDNN_TIMEOUT:-0}" "$BIN/$APP" --device "${DEVICE:-cuda}" --size "$LAYER_TIMES_SIDE" \
      --steps 12 "${app_args[@]}" ${APP_ARGS:-} "$@" --profile --profile-out "$csv" > "${csv%.csv}.log" 2>&1 ||
      { echo "bench_memory: the profile at side $LAYER_TIMES_SIDE failed (${csv%.csv}.log)" >&2; exit 1; }
  }
  lt="$logs/profile_${APP}_${LAYER_TIMES_SIDE}.csv"
  profile "$lt"
  times=(--layer-times "$lt")
  # On a GPU also with the workspace held to the least, as a tight cap holds it: the times of
  # the layers whose faster algorithms (im2col, cuDNN) a plan's workspace leaves out.
  if [ "${DEVICE:-cuda}" = cuda ]; then
    profile "${lt%.csv}_least.csv" --least-workspace
    times+=(--layer-times-least "${lt%.csv}_least.csv")
    if [ -n "${LAYER_TIMES_MID:-}" ]; then
      profile "${lt%.csv}_mid.csv" --workspace-held "$LAYER_TIMES_MID"
      times+=(--layer-times-mid "${lt%.csv}_mid.csv")
    fi
    if [ "${LAYER_TIMES_WIDE:-1}" = 1 ]; then
      profile "${lt%.csv}_wide.csv" --conv-algo implicit
      times+=(--layer-times-wide "${lt%.csv}_wide.csv")
    fi
  fi
  app_args+=("${times[@]}")
  echo "layer times: ${times[*]} (each plan scales them by its layers' output elements)"
fi
rev=$(git describe --always --dirty --abbrev=10 2>/dev/null || echo unknown)
csv_row() { env -u LD_LIBRARY_PATH python3 -c 'import csv,sys; csv.writer(sys.stdout, lineterminator="\n").writerow(sys.argv[1:])' "$@"; }
gib() { [ -n "$1" ] && awk -v v="$1" 'BEGIN { printf "%.3f", v * 1e6 / 1073741824 }' || true; }
cap_gib() { awk -v c="$1" 'BEGIN { n = c + 0; u = toupper(substr(c, length(c), 1));
  m = (u == "K") ? 1 / 1048576 : (u == "M") ? 1 / 1024 : (u == "T") ? 1024 : (u == "G") ? 1 : 1 / 1073741824;
  printf "%.3f", n * m }'; }
# The plan's sizes ("875.0 MiB", format_bytes) in GiB: the first match of the sed pattern $1
# (whose group 1 is the number and group 2 the unit) in the log $2.
plan_gib() { sed -nE "s/$1/\1 \2/p" "$2" | head -1 | awk '{ if ($1 == "") exit;
  m = ($2 == "GiB") ? 1 : ($2 == "MiB") ? 1 / 1024 : ($2 == "KiB") ? 1 / 1048576 : 1 / 1073741824;
  printf "%.3f", $1 * m }'; }
# A row: the columns of COLUMNS; APP=segment's predicted_ms last.
row() { local predicted=$1; shift
  if [ "$APP" = segment ]; then csv_row "$@" "$predicted"; else csv_row "$@"; fi >> "$tmp/rows.csv"; }

declare -A stopped=()  # cap (or none) -> "oom at N" etc.: its larger sides are not run
for side in $SIDES; do
  caps=$CAPS
  for item in ${PLAN:-}; do [ "${item%%:*}" = "$side" ] && caps=$(echo "${item#*:}" | tr '+' ' '); done
  for cap in $([ "${UNCAPPED:-1}" = 1 ] && echo none) $caps; do
    log="$logs/pdnn_${side}_${cap}.log"
    limit=$([ "$cap" = none ] && true || echo "--gpu-memory-limit $cap")
    variant=$([ "$cap" = none ] && echo plain || echo capped)
    capg=$([ "$cap" = none ] && true || cap_gib "$cap")
    limit_s=${PDNN_TIMEOUT:-0} cut=0
    if [ "${BUDGET:-0}" -gt 0 ]; then  # the budget left, if it is the shorter limit
      left=$(( BUDGET - SECONDS ))
      [ $left -lt 5 ] && stopped[$cap]=budget
      if [ "$limit_s" = 0 ] || [ $left -lt "${limit_s%.*}" ]; then limit_s=$left cut=1; fi
    fi
    if [ -n "${stopped[$cap]:-}" ]; then
      printf 'pdnn  %-6s %4s cap %-5s: skipped: %s\n' "$variant" "$side" "$cap" "${stopped[$cap]}"
      row "" "$name" pdnn "$variant" "$side" "$batch" "$PRECISION" "$capg" "" "" "" "" "" 0 \
        "skipped: ${stopped[$cap]}" "" "" "" "" "" "$rev" "$(hostname)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
      continue
    fi
    set +e
    timeout -k 10 "$limit_s" "$BIN/$APP" --device "${DEVICE:-cuda}" --size "$side" --steps "$STEPS" \
      --memory-plan $limit "${app_args[@]}" ${APP_ARGS:-} > "$log" 2>&1
    rc=$?
    set -e
    hdr=$(grep -m1 "^$APP:" "$log" || true)
    gpu=$(echo "$hdr" | sed -nE 's/.*\| cuda: (.*) \| (fp32|TF32|bf16 \(autocast\)), CUDA graph.*/\1/p')
    line=$(grep '^step_ms ' "$log" || true)
    model=$(echo "$line" | sed -nE 's/.* model=([^ ]+) .*/\1/p')
    [ -z "$model" ] && model=$(echo "$hdr" | sed -nE 's/^[a-z0-9]+: model ([^,]+),.*/\1/p')
    name=${model:-$name}  # the skipped rows' too
    peak=$(sed -nE 's/.*peak device memory ([0-9.]+) MB.*/\1/p' "$log")
    resv=$(sed -nE 's/.*peak device memory [0-9.]+ MB \(([0-9.]+) MB reserved\).*/\1/p' "$log")
    med="" lo="" hi="" n=0
    if [ $rc = 0 ] && [ -n "$line" ]; then
      mode=$(echo "$line" | sed -nE 's/.*mode=([a-z]+).*/\1/p')
      status="ok${mode:+ $mode}"
      # the app says when its only timed block was the first (timing and capture in it)
      grep -q '^step_ms: the first block only' "$log" && status="$status, first block only"
      med=$(echo "$line" | sed -E 's/.*median=([0-9.]+).*/\1/')
      lo=$(echo "$line" | sed -E 's/.*min=([0-9.]+).*/\1/')
      hi=$(echo "$line" | sed -E 's/.*max=([0-9.]+).*/\1/')
      n=$(echo "$line" | sed -E 's/.*steps=([0-9]+).*/\1/')
    elif grep -q 'smallest limit it fits under is' "$log"; then
      status="no-fit $(sed -nE 's/.*smallest limit it fits under is ([0-9.]+ [KMGT]iB).*/\1/p' "$log" | tr -d ' ')"
    elif grep -q 'out of GPU memory' "$log"; then
      status=oom
    elif [ $rc = 124 ] && [ $cut = 1 ]; then
      status=budget BUDGET=$SECONDS  # nothing more starts
    elif [ $rc = 124 ]; then
      status=timeout
    else
      status="error rc=$rc"
    fi
    # The plan's peak, step and what it did; the CUDA context (at the end: MB = 1e6 bytes).
    # (an uncapped run's plan as run, after its algorithms were chosen, where it printed one:
    # train/step_memory.h report_plan_as_run)
    planned=$(plan_gib '^memory plan as run: peak ([0-9.]+) ([KMG]?i?B) .*' "$log")
    [ -z "$planned" ] && planned=$(plan_gib '^peak ([0-9.]+) ([KMG]?i?B) at .*' "$log")
    predicted=$(sed -nE 's/^predicted step ([0-9.]+) ms.*/\1/p' "$log" | head -1)
    context=$(gib "$(sed -nE 's/^CUDA context ([0-9.]+) MB at the end.*/\1/p' "$log")")
    [ -z "$context" ] && context=$(plan_gib '.*, CUDA context \(measured\) ([0-9.]+) ([KMG]?i?B).*' "$log")
    plan=$(sed -nE 's/^memory plan applied: (.*); the step.s peak.*/\1/p' "$log" | head -1)
    # The measured binary's revision, from its header (a lent host's tree is a copy whose git
    # history is not the bundle's: its `git describe` named a revision eight commits older).
    run_rev=$(sed -nE 's/.*\| rev ([^ ]+).*/\1/p' "$log" | head -1)
    case $status in ok*) ;; *) stopped[$cap]="${status%% *} at $side" ;; esac
    printf 'pdnn  %-6s %4s cap %-5s: %s, median %s ms (predicted %s), peak %s GiB (reserved %s; planned %s)%s\n' \
      "$variant" "$side" "$cap" "$status" "${med:--}" "${predicted:--}" "$(gib "$peak")" "$(gib "$resv")" \
      "${planned:--}" "${plan:+: $plan}"
    # The arithmetic the run printed (APP_ARGS may change it: --conv-transforms is fp32+transforms)
    arith=$(sed -nE 's/^step_ms .* precision=([^ ]+).*/\1/p' "$log" | head -1)
    row "$predicted" "$name" pdnn "$variant" "$side" "$batch" "${arith:-$PRECISION}" "$capg" "$(gib "$peak")" \
      "$(gib "$resv")" "$med" "$lo" "$hi" "$n" "$status" "$planned" "$context" "$plan" "$gpu" \
      "pdnn $(echo "$gpu" | sed -E 's/.*(driver [0-9.]+, runtime [0-9.]+).*/\1/')" \
      "${run_rev:-$rev}" "$(hostname)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  done
done
env -u LD_LIBRARY_PATH python3 scripts/pylib/results_csv.py append "$OUT" "$COLUMNS" < "$tmp/rows.csv"
if [ "$TORCH" = 1 ]; then
  # Without the bundle's LD_LIBRARY_PATH: PyTorch brings its own CUDA libraries.
  env -u LD_LIBRARY_PATH "$PYTHON" scripts/twins/torch_memory_bench.py --sides "$(echo $SIDES | tr ' ' ',')" \
    "${torch_args[@]}" --steps "$TORCH_STEPS" --timeout "${TORCH_TIMEOUT:-0}" \
    ${TORCH_BENCHMARK_LIMIT:+--benchmark-limit "$TORCH_BENCHMARK_LIMIT"} \
    ${TORCH_CUDNN_BENCHMARK:+--cudnn-benchmark "$TORCH_CUDNN_BENCHMARK"} \
    ${TORCH_WARMUP:+--warmup "$TORCH_WARMUP"} \
    --out "$OUT" || echo "bench_memory: PyTorch run failed" >&2
fi
echo "rows appended to $OUT; plot: python3 scripts/report/plot_memory.py $OUT; table: python3 scripts/report/memory_table.py $OUT"
