#!/usr/bin/env bash
# Rebuilds our cuBLAS's kernels into a scratch directory and compares the
# fat binary, its listing, the resource report and shapes.rs with the
# committed ones; non-zero on any difference.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$here/build.sh" "$scratch" >/dev/null
status=0
for f in cublas.fatbin cublas.fatbin.list.txt resources.txt; do
    cmp -s "$scratch/$f" "$here/$f" || { echo "differs: $f"; status=1; }
done
cmp -s "$scratch/shapes.rs" "$here/../src/kernels/shapes.rs" || { echo "differs: src/kernels/shapes.rs"; status=1; }
[ "$status" = 0 ] && echo "cublas kernels: rebuilt, identical"
exit "$status"
