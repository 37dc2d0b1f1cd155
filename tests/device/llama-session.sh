#!/usr/bin/env bash
# The first command of a device session for the llama.cpp gate, on the
# GPU machine from the repository root, with target/travel.tgz carried
# (tests/device/pack.sh): unpacks it, starts tests/llama/gate.sh in the
# background (GATE_PARTS as the caller sets them), runs the GPU tests of
# tests/tests/gpu.rs and kernel_rm.rs while llama.cpp builds (the build
# needs only the CPUs), then waits for the gate up to WAIT seconds
# (default 240). Later commands wait again with
#
#   bash tests/llama/gate-wait.sh 560 "$OUT"
#
# until it exits 0 (done); it exits 3 at once on a fresh machine (the last
# one was given back), where this script must run again. Results in OUT
# (default device-out): extras.tgz (gpu.txt, kernel_rm.txt, bench-gpu.txt,
# cublas-order.txt and cublas-order.tgz, kernel-chain.txt, case-cost.txt,
# chain-variants.txt, graph-capture.txt: one archive, as a device command
# brings back at most eight files), gate.tgz, summary.txt, progress.txt.
#
# SESSION_EXTRAS names the measurements beside the gate (default: all):
#   bench-gpu     macuda bench gpu, ours beside NVIDIA's loop and graph,
#                 before the build takes the CPUs
#   case-cost     one op-suite case's runtime calls (case-cost.sh), CPUs
#                 idle and busy, before the build (up to 400 s)
#   gpu-tests     tests/tests/gpu.rs and kernel_rm.rs, during the build
#   cublas-order  the router sgemm's summation order, during the build
#   kernel-chain  a decode token's shape (kernel-chain.sh), during the build
#   chain-variants  our chain settings beside stock on small kernels
#                 (chain-variants.sh), during the build
#   graph-capture what libcuda submits to replay a CUDA graph of three
#                 kernels, its QMD chain followed (capture-cuda --graph 3)
# A session short of device time names fewer, so the gate ends in it.
set -u
cd "$(dirname "$0")/../.."
out=${OUT:-device-out}
mkdir -p "$out"
if [ -e target/travel.tgz ]; then
  tar xzf target/travel.tgz || { echo "target/travel.tgz does not unpack"; exit 1; }
fi
extras=" ${SESSION_EXTRAS:-bench-gpu case-cost gpu-tests cublas-order kernel-chain chain-variants graph-capture} "
wants() { [[ $extras == *" $1 "* ]]; }
fresh=yes
[ -e "${GATE_OUT:-/tmp/macuda-gate}/progress.txt" ] && fresh=no
export MACUDA_REPORT_DIR=${MACUDA_REPORT_DIR:-/tmp/macuda-device-reports}
mkdir -p "$MACUDA_REPORT_DIR"
# Empty-kernel launches, ours beside NVIDIA's cudaLaunchKernel loop and a
# CUDA graph, in one run, while the CPUs are still idle.
if [ "$fresh" = yes ] && wants bench-gpu; then
  bash tests/device/bench-gpu.sh "$out" --variants
  cat "$out/bench-gpu.txt" 2>/dev/null
fi
# What one case of the op suite costs in runtime calls, NVIDIA's beside
# ours (case-cost.sh), with the CPUs idle and then all busy (LOAD busy
# loops, twice the machine's CPUs), ours waiting out syncs on the caller's
# thread (the default) beside ours waiting through the actor's mailbox:
# first thing, before the build takes the CPUs.
if [ "$fresh" = yes ] && wants case-cost; then
  rm -f /tmp/macuda-case-cost/case-cost.txt
  for load in 0 $((2 * $(nproc))); do
    LOAD=$load OTHER_ENV=MACUDA_SYNC_WAIT=actor timeout --kill-after=5 200 \
      bash tests/device/case-cost.sh /tmp/macuda-case-cost >/dev/null 2>&1
  done
  cp /tmp/macuda-case-cost/case-cost.txt "$out/case-cost.txt" 2>/dev/null
  cat "$out/case-cost.txt" 2>/dev/null
fi
if [ "$fresh" = no ]; then
  echo "a gate already ran or runs on this machine: waiting for it instead"
else
  setsid nohup bash tests/llama/gate.sh >/tmp/macuda-gate.log 2>&1 </dev/null &
fi
if wants gpu-tests; then
  bash tests/device/gpu-tests.sh "$out" 300
fi
# The summation order of the sgemm a mixture of experts' router makes,
# NVIDIA's beside ours, and its outputs bit for bit (tests/device/cublas.sh's
# order and router parts): whether our cuBLAS gives NVIDIA's bits there
# decides that model's decode.
if wants cublas-order; then
  cublas_out=/tmp/macuda-cublas-order
  rm -rf "$cublas_out"
  OUT=$cublas_out CUBLAS_PARTS="order router" timeout --kill-after=5 300 bash tests/device/cublas.sh >/dev/null 2>&1
  cp "$cublas_out/cublas/summary.txt" "$out/cublas-order.txt" 2>/dev/null
  rm -f "$cublas_out"/cublas/*.lt.log "$cublas_out"/cublas/*.dump
  tar czf "$out/cublas-order.tgz" -C "$cublas_out" cublas 2>/dev/null
  echo "cublas order: $(grep -c 'the same as' "$out/cublas-order.txt" 2>/dev/null) shapes as NVIDIA's, $(grep -c 'DIFFERENT' "$out/cublas-order.txt" 2>/dev/null) not"
  grep "^router" "$out/cublas-order.txt" 2>/dev/null
fi
# The GPU's time a small kernel, NVIDIA's beside ours (kernel-chain.sh).
if wants kernel-chain; then
  timeout --kill-after=5 200 bash tests/device/kernel-chain.sh /tmp/macuda-kernel-chain >/dev/null 2>&1
  cp /tmp/macuda-kernel-chain/kernel-chain.txt "$out/kernel-chain.txt" 2>/dev/null
  cat "$out/kernel-chain.txt" 2>/dev/null
fi
# Our chain settings, each beside stock (chain-variants.sh).
if wants chain-variants; then
  timeout --kill-after=5 200 bash tests/device/chain-variants.sh /tmp/macuda-chain-variants 400 200 8 264 >/dev/null 2>&1
  cp /tmp/macuda-chain-variants/chain-variants.txt "$out/chain-variants.txt" 2>/dev/null
  cat "$out/chain-variants.txt" 2>/dev/null
fi
# How libcuda replays a graph: its push and the QMD chain it uploaded.
if wants graph-capture; then
  timeout --kill-after=5 60 target/device/capture-cuda tests/cuda/fixtures/vector_add.sm_90.cubin vector_add \
    --grid 8 --block 256 --int 2048 --graph 3 >"$out/graph-capture.txt" 2>&1
  echo "graph capture: exit $? ($(grep -c '^# QMD at' "$out/graph-capture.txt") QMDs followed)"
fi
# One archive for the extras (a device command brings back eight files).
extra_files=()
for f in gpu.txt kernel_rm.txt bench-gpu.txt cublas-order.txt cublas-order.tgz kernel-chain.txt \
  case-cost.txt chain-variants.txt graph-capture.txt; do
  [ -e "$out/$f" ] && extra_files+=("$f")
done
if [ ${#extra_files[@]} -gt 0 ] && tar czf "$out/extras.tgz" -C "$out" "${extra_files[@]}"; then
  (cd "$out" && rm -f "${extra_files[@]}")
fi
bash tests/llama/gate-wait.sh "${WAIT:-240}" "$out"
