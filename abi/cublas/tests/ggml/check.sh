#!/usr/bin/env bash
# Regenerates the list of cuBLAS symbols ggml-cuda's objects need and
# compares it with the committed one; non-zero on a difference.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$here/symbols.sh" "$scratch" >/dev/null
if cmp -s "$scratch/ggml-cuda-cublas-symbols.txt" "$here/../data/ggml-cuda-cublas-symbols.txt"; then
    echo "ggml-cuda's cuBLAS symbols: regenerated from its objects, identical"
else
    echo "differs: ggml-cuda-cublas-symbols.txt"
    diff "$scratch/ggml-cuda-cublas-symbols.txt" "$here/../data/ggml-cuda-cublas-symbols.txt" || true
    exit 1
fi
