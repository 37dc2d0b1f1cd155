#!/usr/bin/env bash
# Compiles the CUDA sources beside this script into the loader's test
# fixtures (cubins for sm_90 and sm_120, and two-architecture fatbins
# without compression, with zstd and with LZ4), using NVIDIA's compiler from
# PyPI at pinned versions, and records what cuobjdump says about each file
# so the Rust parsers can be checked against it.
#
#   tests/cuda/build-fixtures.sh [OUTDIR]     (default: tests/cuda/fixtures)
#
# MACUDA_CUDA_VENV names the Python virtual environment to install the
# toolkit into (default: macuda-cuda-venv in the temp directory).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "${1:-$here/fixtures}" && cd "${1:-$here/fixtures}" && pwd)
venv=${MACUDA_CUDA_VENV:-${TMPDIR:-/tmp}/macuda-cuda-venv}
version=13.2.86

if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q \
    "nvidia-cuda-nvcc==$version" "nvidia-cuda-crt==$version" "nvidia-nvvm==$version" \
    "nvidia-cuda-cccl==$version" "nvidia-cuda-runtime==$version" "nvidia-cuda-cuobjdump==$version" \
    "nvidia-cuda-nvdisasm==$version"
root=$("$venv/bin/python" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))')
export PATH="$root/bin:$PATH"
nvcc --version | tail -2

# nvcc names internal-linkage kernels with a hash of the source's absolute
# path (_INTERNAL_<hash>), so the sources are compiled from one fixed
# directory: the fixtures then come out the same wherever the checkout is.
stage=/tmp/macuda-fixture-sources
rm -rf "$stage" && mkdir -p "$stage" && cp "$here"/*.cu "$stage"/
cd "$stage"
for src in *.cu; do
    name=${src%.cu}
    for sm in 90 120; do
        cubin=$name.sm_$sm.cubin
        nvcc -cubin -arch=sm_$sm -o "$out/$cubin" "$src"
        (cd "$out" && cuobjdump -elf "$cubin" > "$cubin.cuobjdump.txt" \
            && cuobjdump --dump-resource-usage "$cubin" > "$cubin.resources.txt")
        # The SASS of dims shows which bank-0 words hold blockDim and gridDim.
        if [ "$name" = dims ]; then
            (cd "$out" && cuobjdump -sass "$cubin" > "$cubin.sass.txt")
        fi
    done
    for mode in none size speed; do
        fatbin=$name.$mode.fatbin
        # vector_add also carries PTX, which a loader without a JIT skips.
        ptx=()
        [ "$name" = vector_add ] && ptx=(-gencode arch=compute_120,code=compute_120)
        nvcc -fatbin -gencode arch=compute_90,code=sm_90 -gencode arch=compute_120,code=sm_120 "${ptx[@]}" \
            -Xfatbin -compress-all -compress-mode="$mode" -o "$out/$fatbin" "$src"
        # cuobjdump notes on stderr that most fatbins hold no PTX.
        (cd "$out" && cuobjdump -lelf -lptx "$fatbin" > "$fatbin.list.txt" 2>/dev/null)
    done
done
echo "fixtures in $out"
