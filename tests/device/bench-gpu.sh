#!/usr/bin/env bash
# `macuda bench gpu` beside NVIDIA's cudaLaunchKernel loop and CUDA graph
# (tests/device/launch_bench.cu, built with the GPU machine's nvcc), from
# the repository root once target/device was carried there. Writes
# OUT/bench-gpu.txt and prints one line: its result, or why it did not run.
#
#   tests/device/bench-gpu.sh OUT [ARG...]     (ARGs go to bench gpu: --variants)
set -u
out=$1
shift
nvcc=${NVCC:-$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)}
ref=/tmp/macuda-launch-bench
if [ -n "$nvcc" ] && timeout 180 "$nvcc" -O2 -arch=sm_90 -o "$ref" tests/device/launch_bench.cu; then
  timeout --kill-after=5 120 target/device/macuda --device kernel bench gpu --launches 200000 \
    "$@" --reference "$ref" >"$out/bench-gpu.txt" 2>&1
  echo "bench gpu: exit $?, $(grep '^gpu-launch:' "$out/bench-gpu.txt")"
else
  echo "bench gpu: no nvcc, or it failed on tests/device/launch_bench.cu"
fi
