#!/usr/bin/env bash
# Regenerates the cuBLAS value table into a scratch directory and compares
# it with the committed one; non-zero on a difference.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$here/generate.sh" "$scratch" >/dev/null
if cmp -s "$scratch/cublas13-values.json" "$here/../data/cublas13-values.json"; then
    echo "cublas values: regenerated, identical"
else
    echo "differs: cublas13-values.json"
    exit 1
fi
