#!/usr/bin/env bash
# Builds llama.cpp's test-backend-ops with its CUDA backend (ggml-cuda) on
# the GPU machine, with the machine's nvcc, for sm_90, without VMM (so
# nothing of it needs libcuda): the binary links NVIDIA's shared cudart
# and cuBLAS, and runs on ours when ours come first on LD_LIBRARY_PATH.
#
#   tests/device/llama-build.sh SRC BUILD      (SRC from llama-source.sh)
set -euo pipefail
src=$1
build=$2
nvcc=${NVCC:-$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)}
started=$SECONDS
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_NO_VMM=ON -DGGML_CUDA_NCCL=OFF -DGGML_NATIVE=OFF \
    -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF >"$build.cmake.log" 2>&1
ninja -C "$build" test-backend-ops >"$build.ninja.log" 2>&1
echo "llama.cpp test-backend-ops built in $((SECONDS - started)) s"
