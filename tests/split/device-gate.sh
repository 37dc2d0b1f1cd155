#!/usr/bin/env bash
# On the GPU machine: the split-built llama.cpp through the same gate as
# the nvcc-built one (issue 17's check on real hardware). It needs what the
# GPU machine cannot make itself, carried as one archive (built where
# clang 19 and a network are; see the README's "user's build" section):
# llama.cpp's source (.llama), our shared libraries (the gate's stock-side
# existence check; target/device/cublas/lib), and from WORK the host-half
# archive, the registry object and our static libraries (libs/).
#
#   tests/split/device-gate.sh start WORK OUT   # from the repository root
#   tests/llama/gate-wait.sh 560 OUT            # later calls, until done
#
# `start` builds stock llama.cpp with nvcc in the background and, beside
# it, the CPU-only build and the link replay of the split one; once the
# link is done it shows what the split binaries load (ldd, and the maps of
# a running test-backend-ops: no NVIDIA library, only the kernel module's
# device nodes), then starts tests/llama/gate.sh with OURS_BIN pointing at
# them (GATE_PARTS, default "decode ops"; GATE_DECODE_MODELS, default the
# 1B and MoE Q4_0 models) and returns; gate-wait.sh reports it.
#
# Where target/device holds what tests/device/build.sh makes (carried
# beside the archive), SPLIT_EXTRAS (default "bench-gpu gpu-tests") adds
# the device checks that need no llama.cpp: `macuda bench gpu` beside
# NVIDIA's loop and graph first, while the CPUs are idle (OUT/bench-gpu.txt;
# BENCH_GPU_ARGS, e.g. --variants), with `macuda bench launch` on the null
# device (OUT/bench-launch-null.txt); `chain-variants`, the graph of small
# kernels stock beside ours under CHAIN_VARIANTS (OUT/chain-variants/);
# and the GPU test binaries (gpu, kernel_rm) while stock's build runs
# (OUT/gpu.txt, OUT/kernel_rm.txt), each line of the outcome in the log.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "${1:-}" = start ] || { echo "usage: $0 start WORK OUT" >&2; exit 2; }
work=$2
out=$3
mkdir -p "$out"
log=$out/split-device.txt
: >"$log"
jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 8)
[ -e "$work/libggml-cuda.a" ] && [ -e "$work/libs/libcudart.a" ] \
  || { echo "no host halves or static libraries in $work" | tee -a "$log"; exit 1; }

extras=" ${SPLIT_EXTRAS-bench-gpu gpu-tests} "
export MACUDA_REPORT_DIR=${MACUDA_REPORT_DIR:-/tmp/macuda-device-reports}
mkdir -p "$MACUDA_REPORT_DIR"
if [[ $extras == *" bench-gpu "* ]] && [ -x target/device/macuda ]; then
  # shellcheck disable=SC2086 # BENCH_GPU_ARGS is a list of arguments
  bash tests/device/bench-gpu.sh "$out" ${BENCH_GPU_ARGS-} | tee -a "$log"
  # The same actor on this host's CPUs with no GPU under it (the null
  # device): set beside the line above, it says how much of the actor's
  # cost here is the CPU and how much the card's mappings.
  timeout --kill-after=5 120 target/device/macuda bench launch >"$out/bench-launch-null.txt" 2>&1
  echo "bench launch, null device on this host: exit $?, $(grep '^launch:' "$out/bench-launch-null.txt")" | tee -a "$log"
fi
if [[ $extras == *" chain-variants "* ]]; then
  # A graph of small dependent kernels, stock beside ours under the
  # settings CHAIN_VARIANTS names (the script's own set where unset).
  VARIANTS=${CHAIN_VARIANTS-} bash tests/device/chain-variants.sh "$out/chain-variants" 400 200 8 264 \
    >"$out/chain-variants.log" 2>&1
  echo "chain variants: exit $?" | tee -a "$log"
  cat "$out/chain-variants/chain-variants.txt" >>"$log" 2>/dev/null
fi

# Stock's nvcc build and the split CPU build share the CPUs; the link waits
# for its own half only.
gate_out=${GATE_OUT:-/tmp/macuda-gate}
mkdir -p "$gate_out"
# gate-wait.sh looks for this file; gate.sh starts it over.
echo "$(date +%H:%M:%S) waiting for stock's build" >"$gate_out/progress.txt"
rm -f "$out/stock-build.rc"
setsid bash -c 'bash tests/llama/build.sh .llama "$1" >"$2/stock-build.txt" 2>&1; echo $? >"$2/stock-build.rc"' \
  _ "${LLAMA_BUILD:-/tmp/macuda-llama-build}" "$out" </dev/null >/dev/null 2>&1 &
started=$SECONDS
if ! tests/split/build.sh cpu link --work "$work" --src .llama --libs "$work/libs" \
    --jobs "$jobs" >"$out/split-build.txt" 2>&1; then
  echo "FAILED  split cpu+link (see split-build.txt)" | tee -a "$log"
  tail -20 "$out/split-build.txt"
  exit 1
fi
echo "split cpu+link: $((SECONDS - started)) s" | tee -a "$log"
grep -E '^link:' "$out/split-build.txt" | tee -a "$log" || true

# What a running split binary has mapped: ours is linked in; NVIDIA's user
# libraries must be absent (the module's device nodes are how we reach RM).
bin=$work/bin
{
  echo "--- ldd $bin/test-backend-ops"
  ldd "$bin/test-backend-ops"
} >>"$log"
"$bin/test-backend-ops" perf -o MUL_MAT -b CUDA0 >"$out/maps-run.txt" 2>&1 &
runner=$!
sleep 4
maps=$(cat "/proc/$runner/maps" 2>/dev/null || true)
kill "$runner" 2>/dev/null || true
wait "$runner" 2>/dev/null || true
if [ -z "$maps" ]; then
  echo "FAILED  test-backend-ops ended before its maps could be read" | tee -a "$log"
else
  libs=$(awk '$6 ~ /\// { print $6 }' <<<"$maps" | sort -u)
  echo "--- files mapped by a running test-backend-ops (pid $runner)" >>"$log"
  echo "$libs" >>"$log"
  if grep -Ei 'libcuda|libcublas|libnvidia|libnvrtc|libcudart' <<<"$libs"; then
    echo "FAILED  an NVIDIA library is mapped" | tee -a "$log"
  else
    echo "ok      no NVIDIA library mapped; device nodes: $(grep -c '/dev/nvidia' <<<"$libs")" | tee -a "$log"
  fi
fi

# The gate starts once stock's build is done (it would build stock itself
# otherwise), in the background: this command returns now.
GATE_PARTS=${GATE_PARTS:-decode ops} \
  GATE_DECODE_MODELS=${GATE_DECODE_MODELS:-1b-q4_0 moe-q4_0} \
  OURS_BIN=$bin GATE_OPS_JOBS=${GATE_OPS_JOBS:-6} GATE_OUT=$gate_out \
  setsid bash -c '
    while [ ! -e "$1/stock-build.rc" ]; do sleep 5; done
    if [ "$(cat "$1/stock-build.rc")" = 0 ]; then
      exec bash tests/llama/gate.sh
    fi
    echo "FAILED  stock build (see stock-build.txt)" >>"$2/summary.txt"
    echo "$(date +%H:%M:%S) done" >>"$2/progress.txt"' _ "$out" "$gate_out" \
  >"$out/gate-log.txt" 2>&1 </dev/null &
echo "gate starts when stock's build is done" | tee -a "$log"
# The GPU is idle until then.
if [[ $extras == *" gpu-tests "* ]]; then
  bash tests/device/gpu-tests.sh "$out" 150 | tee -a "$log"
fi
