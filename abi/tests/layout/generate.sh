#!/usr/bin/env bash
# Regenerates abi/tests/data/cudart{12,13}-layout.json: the offsets of the
# CUDA runtime structures abi fills and the values of the enums it answers
# with, printed by layout.c compiled against NVIDIA's headers from PyPI at
# pinned versions (CUDA 13.2 and 12.9).
#
#   abi/tests/layout/generate.sh [OUTDIR]      (default: abi/tests/data)
#
# MACUDA_CUDA_VENV names the Python virtual environment to install the
# headers into (default: macuda-cuda-venv in the temp directory, the one
# tests/cuda/build-fixtures.sh uses).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "${1:-$here/../data}" && cd "${1:-$here/../data}" && pwd)
venv=${MACUDA_CUDA_VENV:-${TMPDIR:-/tmp}/macuda-cuda-venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q \
    "nvidia-cuda-runtime==13.2.86" "nvidia-cuda-crt==13.2.86" \
    "nvidia-cuda-runtime-cu12==12.9.79" "nvidia-cuda-nvcc-cu12==12.9.86"
site=$("$venv/bin/python" -c 'import nvidia, os; print(list(nvidia.__path__)[0])')
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
gcc -I "$site/cu13/include" -o "$scratch/l13" "$here/layout.c"
gcc -DCUDART_12 -I "$site/cuda_runtime/include" -I "$site/cuda_nvcc/include" \
    -o "$scratch/l12" "$here/layout.c"
"$scratch/l13" > "$out/cudart13-layout.json"
"$scratch/l12" > "$out/cudart12-layout.json"
echo "layouts in $out"
