#!/usr/bin/env bash
# Builds llama.cpp's test-backend-ops, llama-simple, llama-bench and
# llama-eval-callback with its CUDA backend (ggml-cuda), with the
# machine's nvcc, for sm_90, without VMM (so nothing of it needs libcuda's
# driver API): the binaries link NVIDIA's
# shared cudart and cuBLAS, and run on ours when ours come first on
# LD_LIBRARY_PATH. LLAMA_CUDA=OFF builds the same binaries CPU-only (to
# try models and scripts on a machine without a GPU).
#
#   tests/llama/build.sh SRC BUILD      (SRC from tests/llama/source.sh)
set -euo pipefail
src=$1
build=$2
cuda=${LLAMA_CUDA:-ON}
arch=${LLAMA_CUDA_ARCH:-90}
started=$SECONDS
flags=(-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_TOOLS=ON
       -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF)
if [ "$cuda" = ON ]; then
    nvcc=${NVCC:-$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)}
    flags+=(-DGGML_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch"
            -DGGML_CUDA_NO_VMM=ON -DGGML_CUDA_NCCL=OFF)
fi
cmake -S "$src" -B "$build" -G Ninja "${flags[@]}" >"$build.cmake.log" 2>&1 \
    || { tail -30 "$build.cmake.log"; exit 1; }
ninja -C "$build" test-backend-ops llama-simple llama-bench llama-eval-callback >"$build.ninja.log" 2>&1 \
    || { tail -30 "$build.ninja.log"; exit 1; }
echo "llama.cpp (CUDA $cuda) test-backend-ops, llama-simple, llama-bench, llama-eval-callback built in $((SECONDS - started)) s"
