#!/usr/bin/env bash
# The release gate for llama.cpp on our stack, on a Linux machine with an
# NVIDIA GPU and NVIDIA's kernel module (the H200), from the repository
# root, after tests/device/build.sh (on any x86_64 Linux machine),
# tests/llama/source.sh .llama (where there is a network) and, where the
# GPU machine is another, tests/device/pack.sh (carry target/travel.tgz
# and unpack it there):
#
#   1. builds llama.cpp there (tests/llama/build.sh, in the background),
#   2. meanwhile writes the random-weight models (random_gguf.py: 1B Q4_0
#      and F16, 8B-shaped Q4_0, mixture of experts Q4_0),
#   3. runs the parts named in GATE_PARTS, stock and ours in the same run:
#        ops            every op of test-backend-ops (ops.sh)
#        ops-nographs   the same with GGML_CUDA_DISABLE_GRAPHS=1
#        ops-depth32    ours with MACUDA_CHAIN_DEPTH=32 (stock reused)
#        ops-depth64    ours with MACUDA_CHAIN_DEPTH=64 (stock reused;
#                       128 is the default, the ops part)
#        ops-depth1     ours with MACUDA_CHAIN_DEPTH=1: every launch a
#                       chain of its own, so no grid schedules the next
#                       (no dependent-QMD links; stock reused): tells a
#                       stall of the links from one of the queues
#        ops-sync       ours with MACUDA_SYNC_LAUNCHES=1 (stock reused)
#        ops-copyengine ours with MACUDA_COPY_ENGINE=2: the copy channel in
#                       a group of its own on copy engine 2, as CUDA
#                       places its copies (stock reused)
#        ops-membargpu  ours with MACUDA_CHAIN_MEMBAR=gpu: a GPU-wide barrier
#                       between the grids of a chain, the tail's still
#                       system-wide (stock reused)
#        decode         greedy text byte-compared (decode.sh)
#        bench          llama-bench pp512 / tg128 ratios (bench.sh)
#        variants       llama-bench tg128, stock beside ours under each of
#                       our performance settings (variants.sh)
#        fault          llama-simple with the submit actor failing under it
#                       (MACUDA_INJECT), and with a kernel faulting on the
#                       GPU (MACUDA_INJECT_GPU_FAULT): ggml's CUDA error
#                       with ours, no hang, and the next run as stock's
#      (default: all but ops-depth1 and ops-copyengine, which tell one
#      cause of a queue that stands still from another and showed none
#      on the H200 once GP_PUT was read back before the doorbell, and
#      ops-membargpu, a candidate default's check; decode,
#      bench and fault first, each alone on the GPU, then the op-suite
#      parts, the longest, side by side, GATE_OPS_JOBS ops of ours at a
#      time each, default 3, and stock's whole suite with GATE_STOCK_JOBS
#      workers, default 8),
#   4. writes GATE_OUT/summary.txt: what ran, what passed, the figures.
#
# It can run longer than one command may: start it with setsid in the
# background and wait for it from later commands with
# tests/llama/gate-wait.sh (which returns at once on a machine where no
# gate was started: a fresh one, if the last was given back). LLAMA_SRC (default .llama), LLAMA_BUILD (default
# /tmp/macuda-llama-build), MODELS (default /tmp/macuda-models), GATE_OUT
# (default /tmp/macuda-gate); our libraries from target/device/cublas/lib.
set -u
cd "$(dirname "$0")/../.."
here=tests/llama
src=${LLAMA_SRC:-.llama}
build=${LLAMA_BUILD:-/tmp/macuda-llama-build}
models=${MODELS:-/tmp/macuda-models}
out=${GATE_OUT:-/tmp/macuda-gate}
lib=${MACUDA_LIBS:-target/device/cublas/lib}
parts=" ${GATE_PARTS:-ops ops-nographs ops-depth32 ops-depth64 ops-sync decode bench variants fault} "
mkdir -p "$out" "$models"
summary=$out/summary.txt
progress=$out/progress.txt
: >"$summary"
: >"$progress"
export MACUDA_REPORT_DIR=${MACUDA_REPORT_DIR:-/tmp/macuda-device-reports}
mkdir -p "$MACUDA_REPORT_DIR"
say() { echo "$*" | tee -a "$summary"; }
note() { echo "$(date +%H:%M:%S) $*" >>"$progress"; }
passed=0
failed=0
result() { # NAME RC
  if [ "$2" -eq 0 ]; then passed=$((passed + 1)); say "ok      $1"; else failed=$((failed + 1)); say "FAILED  $1 (exit $2)"; fi
}

[ -e "$lib/libcudart.so.13" ] || { say "FAILED  no libraries of ours in $lib (run tests/device/build.sh)"; exit 1; }
[ -e "$src/CMakeLists.txt" ] || { say "FAILED  no llama.cpp source in $src (run tests/llama/source.sh $src)"; exit 1; }
say "llama.cpp $(cat "$src/llama-cpp-python.version" 2>/dev/null || echo '?') from $src; GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"

# 1. The build, in the background.
if [ ! -x "$build/bin/llama-simple" ] || [ ! -x "$build/bin/test-backend-ops" ] || [ ! -x "$build/bin/llama-bench" ] \
  || [ ! -x "$build/bin/llama-eval-callback" ]; then
  note "build started"
  bash "$here/build.sh" "$src" "$build" >"$out/build.txt" 2>&1 &
  builder=$!
else
  builder=
  echo "reused $build" >"$out/build.txt"
fi

# 2. The models, meanwhile.
vocab=$src/models/ggml-vocab-llama-spm.gguf
want=()
# GATE_DECODE_MODELS: the models the decode part compares (default all
# four: 1b-q4_0 1b-f16 8b-q4_0 moe-q4_0).
read -r -a decode_models <<<"${GATE_DECODE_MODELS:-1b-q4_0 1b-f16 8b-q4_0 moe-q4_0}"
[[ $parts == *" decode "* ]] && for m in "${decode_models[@]}"; do want+=("${m%%-*}:${m#*-}"); done
[[ $parts == *" bench "* ]] && want+=(1b:q4_0 8b:q4_0)
[[ $parts == *" variants "* ]] && want+=(1b:q4_0 8b:q4_0)
[[ $parts == *" fault "* ]] && want+=(1b:q4_0)
for m in $(printf '%s\n' "${want[@]}" | awk '!seen[$0]++'); do
  shape=${m%%:*}
  type=${m##*:}
  f=$models/random-$shape-$type.gguf
  if [ ! -s "$f" ]; then
    note "model $shape $type"
    if ! python3 "$here/random_gguf.py" "$f.part" --shape "$shape" --type "$type" --vocab "$vocab" \
        --gguf-py "$src/gguf-py" >>"$out/models.txt" 2>&1; then
      say "FAILED  model $shape $type (see models.txt)"
      failed=$((failed + 1))
      continue
    fi
    mv "$f.part" "$f"
  fi
done
model() { echo "$models/random-$1.gguf"; }

if [ -n "$builder" ]; then
  wait "$builder"
  rc=$?
  note "build done ($rc)"
  result "llama.cpp build ($(tail -1 "$out/build.txt"))" "$rc"
  [ "$rc" -eq 0 ] || exit 1
fi

# 3. The parts. Greedy decode first: the byte-compare is the check that
# matters most and takes minutes.
if [[ $parts == *" decode "* ]]; then
  note "decode started"
  # NVIDIA's side of the timeline, where CUPTI builds here.
  stock_trace_lib=$(bash tests/device/cupti-trace.sh "$out/cupti" 2>"$out/cupti.txt")
  decode_files=()
  for m in "${decode_models[@]}"; do decode_files+=("$(model "$m")"); done
  STOCK_TRACE_LIB=$stock_trace_lib OURS_ENV=${GATE_OURS_ENV:-} bash "$here/decode.sh" "$build" "$lib" "$out/decode" \
    "${decode_files[@]}" >"$out/decode.log" 2>&1
  rc=$?
  result "greedy decode, ours byte-identical to stock${GATE_OURS_ENV:+ (ours with $GATE_OURS_ENV)}" "$rc"
  sed 's/^/        /' "$out/decode/decode.txt" | tee -a "$summary"
  # For a model whose text differs, the first tensor ours computes
  # differently (diverge.sh).
  for name in "${decode_models[@]}"; do
    grep -q "differs: decode-random-$name\." "$out/decode/decode.txt" || continue
    bash "$here/diverge.sh" "$build" "$lib" "$out/diverge" "$(model "$name")" "$src" 2>&1 \
      | sed 's/^/        /' | tee -a "$summary"
  done
fi
if [[ $parts == *" bench "* ]]; then
  note "bench started"
  # A third side, ours with graphs replayed node by node (as before chains
  # were recorded), unless GATE_BENCH_OTHER says otherwise ("" for none).
  OURS_ENV=${GATE_OURS_ENV:-} OTHER_ENV=${GATE_BENCH_OTHER-MACUDA_GRAPH_REPLAY=nodes ${GATE_OURS_ENV:-}} \
    bash "$here/bench.sh" "$build" "$lib" "$out/bench" "$(model 1b-q4_0)" "$(model 8b-q4_0)" >"$out/bench.log" 2>&1
  rc=$?
  result "llama-bench, stock and ours interleaved${GATE_OURS_ENV:+ (ours with $GATE_OURS_ENV)}" "$rc"
  sed 's/^/        /' "$out/bench/bench.txt" | tee -a "$summary"
fi
if [[ $parts == *" variants "* ]]; then
  note "variants started"
  bash "$here/variants.sh" "$build" "$lib" "$out/variants" "$(model 1b-q4_0)" "$(model 8b-q4_0)" >"$out/variants.log" 2>&1
  rc=$?
  result "llama-bench tg128 under each of our settings" "$rc"
  sed 's/^/        /' "$out/variants/variants.txt" | tee -a "$summary"
fi
if [[ $parts == *" fault "* ]]; then
  note "fault started"
  f=$out/fault
  m=$(model 1b-q4_0)
  simple() { timeout --kill-after=5 120 "$build/bin/llama-simple" -m "$m" -n 64 -ngl 99 "The history of the graphics processor begins"; }
  simple >"$f.stock.txt" 2>"$f.stock.err"
  # An actor failing under llama-simple, then a kernel faulting on the GPU
  # (its 500th launch reads through an unmapped address); after each, a
  # fresh process must decode as stock did.
  for fault in MACUDA_INJECT=submit:panic:300 MACUDA_INJECT_GPU_FAULT=500; do
    d=$f/${fault%%=*}
    mkdir -p "$d/reports"
    # simple is a shell function, which env cannot run: export in a subshell.
    (export "$fault" MACUDA_REPORT_DIR="$d/reports" MACUDA_DEVICE=kernel LD_LIBRARY_PATH="$lib"
      simple) >"$d/faulted.txt" 2>"$d/faulted.err"
    rc_f=$?
    MACUDA_REPORT_DIR="$d/reports" MACUDA_DEVICE=kernel LD_LIBRARY_PATH="$lib" simple >"$d/after.txt" 2>"$d/after.err"
    rc_a=$?
    # An actor's failure, or the supervisor's contained recovery of a
    # channel fault (an incident): a report each.
    reports=$(ls "$d/reports"/*-failure.msgpack "$d/reports"/*-incident.msgpack 2>/dev/null | wc -l)
    why=$(grep -m1 -i "cuda error" "$d/faulted.err")
    same=no
    [ -s "$f.stock.txt" ] && cmp -s "$f.stock.txt" "$d/after.txt" && same=yes
    ok=1
    # Ended by itself (ggml aborts on a CUDA error: 134), not by the time
    # limit; told by ggml; then a normal run.
    { [ "$rc_f" -ne 0 ] && [ "$rc_f" -lt 124 ]; } || [ "$rc_f" -eq 134 ] || ok=0
    { [ -n "$why" ] && [ "$rc_a" -eq 0 ] && [ "$same" = yes ]; } || ok=0
    result "$fault under llama-simple: exit $rc_f, '${why:-no CUDA error printed}', $reports crash report(s); the next run exit $rc_a, text as stock's: $same" $((1 - ok))
  done
fi
# The op-suite parts run side by side (each runs
# GATE_OPS_JOBS ops of ours at once): the variants of ours start as soon
# as stock's graphs-on suite has finished, since they reuse it.
ops_jobs=${GATE_OPS_JOBS:-3}
ops_names=()
ops_dirs=()
ops_pids=()
# GATE_OURS_ENV="K=V ..." goes to ours in the decode, bench and every
# op-suite part (e.g. MACUDA_CHAIN_MEMBAR=gpu, to check a candidate
# default everywhere at once).
ops_start() { # NAME OUTDIR; BOTH_ENV, OURS_ENV and STOCK_FROM as the caller sets them
  note "$1 started"
  OURS_ENV="${OURS_ENV:-} ${GATE_OURS_ENV:-}" STOCK_JOBS=${GATE_STOCK_JOBS:-8} OPS_JOBS=$ops_jobs \
    bash "$here/ops.sh" "$build" "$lib" "$2" >"$2.log" 2>&1 &
  ops_pids+=($!)
  ops_names+=("$1")
  ops_dirs+=("$2")
}
if [[ $parts == *" ops "* ]]; then
  ops_start "test-backend-ops, graphs on" "$out/ops"
fi
if [[ $parts == *" ops-nographs "* ]]; then
  BOTH_ENV=GGML_CUDA_DISABLE_GRAPHS=1 ops_start "test-backend-ops, graphs off" "$out/ops-nographs"
fi
variants=()
for v in depth32:MACUDA_CHAIN_DEPTH=32 depth64:MACUDA_CHAIN_DEPTH=64 depth1:MACUDA_CHAIN_DEPTH=1 sync:MACUDA_SYNC_LAUNCHES=1 copyengine:MACUDA_COPY_ENGINE=2 membargpu:MACUDA_CHAIN_MEMBAR=gpu; do
  [[ $parts == *" ops-${v%%:*} "* ]] && variants+=("$v")
done
if [ ${#variants[@]} -gt 0 ]; then
  stock_from=
  if [[ $parts == *" ops "* ]]; then
    # Stock's suite is done when its exit status is written.
    while [ ! -e "$out/ops/stock-all.rc" ] && kill -0 "${ops_pids[0]}" 2>/dev/null; do sleep 5; done
  fi
  [ -e "$out/ops/stock-all.rc" ] && stock_from=$out/ops
  for v in "${variants[@]}"; do
    STOCK_FROM=$stock_from OURS_ENV=${v#*:} ops_start "test-backend-ops, ours with ${v#*:}" "$out/ops-${v%%:*}"
  done
fi
for i in "${!ops_pids[@]}"; do
  wait "${ops_pids[$i]}"
  rc=$?
  note "${ops_names[$i]} done ($rc)"
  d=${ops_dirs[$i]}
  result "${ops_names[$i]}: $(tail -1 "$d/ops.txt")" "$rc"
  grep -v "ours did not pass: 0$" "$d/ops.txt" | grep -v "^ops:" | head -40 | sed 's/^/        /' | tee -a "$summary"
done
dmesg 2>/dev/null | grep -i -E "xid|nvrm" | tail -20 >"$out/kernel-log.txt"
say "passed $passed, failed $failed"
note "done"
[ "$failed" -eq 0 ]
