#!/usr/bin/env bash
# Puts NVIDIA's cuBLAS and CUDA 13 runtime headers and shared libraries,
# and nvcc, from PyPI at pinned versions, into a virtual environment
# (MACUDA_CUDA_VENV, as for tests/cuda/build-fixtures.sh) and prints the
# directory that holds them (its include/ and lib/).
#
#   abi/cublas/tests/headers.sh      ->  the CUDA 13 root of that environment
#                                       (include/, lib/, bin/nvcc)
set -euo pipefail
venv=${MACUDA_CUDA_VENV:-${TMPDIR:-/tmp}/macuda-cuda-venv}
cublas=13.1.0.3
cuda=13.2.86
if [ ! -f "$venv/bin/cublas-$cublas-nvcc-ready" ]; then
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q "nvidia-cublas==$cublas" "nvidia-cuda-runtime==$cuda" \
        "nvidia-cuda-crt==$cuda" "nvidia-cuda-nvcc==$cuda" "nvidia-nvvm==$cuda" "nvidia-cuda-cccl==$cuda" >&2
    touch "$venv/bin/cublas-$cublas-nvcc-ready"
fi
"$venv/bin/python" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))'
