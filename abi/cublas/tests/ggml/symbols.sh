#!/usr/bin/env bash
# Lists the cuBLAS symbols ggml-cuda's objects leave undefined, from real
# objects: the translation units of llama.cpp's ggml-cuda (the
# llama-cpp-python sdist pinned in tests/llama/llama-cpp-python.version)
# that mention cuBLAS, compiled by NVIDIA's nvcc from PyPI against NVIDIA's
# cuBLAS headers, then read with nm.
# Writes ../data/ggml-cuda-cublas-symbols.txt (or OUTDIR/ when named);
# tests/programs.rs checks our library exports every one.
#
#   abi/cublas/tests/ggml/symbols.sh [OUTDIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "${1:-$here/../data}" && cd "${1:-$here/../data}" && pwd)
root=$("$here/../headers.sh")
export PATH="$root/bin:$PATH"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$here/../../../../tests/llama/source.sh" "$scratch/llama" >/dev/null
cuda=$scratch/llama/ggml/src/ggml-cuda
units=$(grep -l cublas "$cuda"/*.cu | sort)
for u in $units; do
    nvcc -c -std=c++17 -arch=sm_90 -I "$scratch/llama/ggml/include" -I "$scratch/llama/ggml/src" -I "$cuda" \
        -I "$root/include" -DGGML_CUDA_NO_VMM -o "$scratch/$(basename "$u" .cu).o" "$u"
done
nm -u "$scratch"/*.o | awk '{ print $2 }' | grep -E '^cublas' | sort -u > "$out/ggml-cuda-cublas-symbols.txt"
echo "$(wc -l < "$out/ggml-cuda-cublas-symbols.txt") cuBLAS symbols from $(echo "$units" | wc -w) ggml-cuda objects, in $out"
