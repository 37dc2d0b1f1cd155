#!/usr/bin/env bash
# Builds our cuBLAS's kernels from the CUDA sources beside this script with
# NVIDIA's nvcc from PyPI (pinned, as the loader fixtures are) into one fat
# binary the library embeds, plus what the Rust side reads of them:
#
#   cublas.fatbin          sm_80, sm_86, sm_89, sm_90a and sm_120 cubins,
#                          compressed (the library registers it as compiled
#                          host code would)
#   cublas.fatbin.list.txt cuobjdump's listing of it
#   resources.txt          registers, shared memory, stack and spills per
#                          kernel and architecture
#   ../src/kernels/shapes.rs  block sizes, tiles and shared memory, printed
#                          from the kernels' own constants by shapes.cu
#
#   abi/cublas/kernels/build.sh [OUTDIR]    (default: beside this script;
#                                            shapes.rs goes to OUTDIR too
#                                            when one is named)
#
# MACUDA_CUDA_VENV as for tests/cuda/build-fixtures.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -ge 1 ]; then
    out=$(mkdir -p "$1" && cd "$1" && pwd)
    shapes_out=$out/shapes.rs
else
    out=$here
    shapes_out=$here/../src/kernels/shapes.rs
fi
venv=${MACUDA_CUDA_VENV:-${TMPDIR:-/tmp}/macuda-cuda-venv}
version=13.2.86
if [ ! -f "$venv/bin/cublas-kernels-ready" ]; then
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q \
        "nvidia-cuda-nvcc==$version" "nvidia-cuda-crt==$version" "nvidia-nvvm==$version" \
        "nvidia-cuda-cccl==$version" "nvidia-cuda-runtime==$version" "nvidia-cuda-cuobjdump==$version"
    touch "$venv/bin/cublas-kernels-ready"
fi
root=$("$venv/bin/python" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))')
export PATH="$root/bin:$PATH"

# nvcc hashes a source's absolute path into some symbol names; compile
# from one fixed directory so the output is the same wherever the
# checkout is.
stage=/tmp/macuda-cublas-kernel-sources
rm -rf "$stage" && mkdir -p "$stage" && cp "$here"/*.cu "$here"/*.cuh "$stage"/
cd "$stage"
archs=(
    -gencode arch=compute_80,code=sm_80
    -gencode arch=compute_86,code=sm_86
    -gencode arch=compute_89,code=sm_89
    -gencode arch=compute_90a,code=sm_90a
    -gencode arch=compute_120,code=sm_120
)
nvcc -fatbin -std=c++17 "${archs[@]}" -Xfatbin -compress-all -compress-mode=size \
    -Xptxas -v -o "$out/cublas.fatbin" kernels.cu 2> ptxas.log
# ptxas's report, one line per kernel and architecture.
awk '/Compiling entry function/ { k = $7; a = $9 }
     /bytes stack frame/ { f = $1 " stack, " $5 " spill stores, " $9 " spill loads" }
     /Used [0-9]+ registers/ { sub(/.*Used /, "Used "); print a, k, $0 ";", f }' ptxas.log \
    | tr -d "'" | sort > "$out/resources.txt"
cuobjdump -lelf "$out/cublas.fatbin" > "$out/cublas.fatbin.list.txt"
nvcc -std=c++17 -o shapes shapes.cu
./shapes > "$shapes_out"
echo "kernels: $(wc -c < "$out/cublas.fatbin") bytes of fat binary, $(wc -l < "$out/resources.txt") kernel builds, in $out"
