#!/usr/bin/env bash
# Regenerates abi/cublas/tests/data/cublas13-values.json: the values of the
# cuBLAS enums our library declares, printed by values.c compiled against
# NVIDIA's cuBLAS 13 headers from PyPI (pinned in ../headers.sh).
#
#   abi/cublas/tests/values/generate.sh [OUTDIR]   (default: ../data)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "${1:-$here/../data}" && cd "${1:-$here/../data}" && pwd)
root=$("$here/../headers.sh")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
gcc -I "$root/include" -o "$scratch/values" "$here/values.c"
"$scratch/values" > "$out/cublas13-values.json"
echo "values in $out"
