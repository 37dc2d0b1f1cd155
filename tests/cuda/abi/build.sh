#!/usr/bin/env bash
# Builds the ABI test programs beside this script: each .cu is compiled by
# NVIDIA's nvcc from PyPI (pinned, as the fixtures are) into a host object
# for sm_90 and sm_120, then linked against our libcudart.a, and, with
# --nvidia, a second time against NVIDIA's static cudart (what
# tests/device/run.sh compares ours with on a GPU).
#
#   tests/cuda/abi/build.sh OUTDIR LIBCUDART.a [--nvidia]
#
# basics is also linked against NVIDIA's shared runtimes (libcudart.so.13
# and .so.12, from PyPI) as basics.so13 and basics.so12: binaries that
# name NVIDIA's sonames and symbol versions, for loading ours in their
# place (abi/build-libs.sh).
#
# Objects are kept in OUTDIR and rebuilt only when a source changes; the
# links are redone every time (they are what changes with our library).
# MACUDA_CUDA_VENV as for tests/cuda/build-fixtures.sh.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
lib=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
nvidia=${3:-}
venv=${MACUDA_CUDA_VENV:-${TMPDIR:-/tmp}/macuda-cuda-venv}
version=13.2.86

if [ ! -f "$venv/bin/abi-programs-ready" ]; then
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q \
        "nvidia-cuda-nvcc==$version" "nvidia-cuda-crt==$version" "nvidia-nvvm==$version" \
        "nvidia-cuda-cccl==$version" "nvidia-cuda-runtime==$version" \
        "nvidia-cuda-runtime-cu12==12.9.79"
    touch "$venv/bin/abi-programs-ready"
fi
root=$("$venv/bin/python" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))')
export PATH="$root/bin:$PATH"

# What the Rust runtime's static library needs from the system.
system_libs=(-lpthread -ldl -lm -lrt -lgcc_s)
archs=(-gencode arch=compute_90,code=sm_90 -gencode arch=compute_120,code=sm_120)

for src in "$here"/*.cu; do
    name=$(basename "${src%.cu}")
    stamp="$out/$name.stamp"
    want=$(cat "$src" "$here"/*.h | sha256sum | cut -d' ' -f1)
    if [ ! -f "$out/$name.o" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        nvcc -c -std=c++17 "${archs[@]}" -I "$here" -o "$out/$name.o" "$src"
        echo "$want" > "$stamp"
    fi
    g++ -o "$out/$name" "$out/$name.o" "$lib" "${system_libs[@]}"
    if [ "$nvidia" = --nvidia ]; then
        g++ -o "$out/$name.nvidia" "$out/$name.o" -L "$root/lib" -lcudart_static -lpthread -ldl -lrt
    fi
done
site=$(dirname "$root")
g++ -o "$out/basics.so13" "$out/basics.o" "$root/lib/libcudart.so.13"
g++ -o "$out/basics.so12" "$out/basics.o" "$site/cuda_runtime/lib/libcudart.so.12"

# C programs (clang's host code, written out): ours only.
fixtures=$(cd "$here/../fixtures" && pwd)
for src in "$here"/*.c; do
    name=$(basename "${src%.c}")
    gcc -std=c11 -O1 -I "$here" -I "$root/include" -DFIXTURES="\"$fixtures\"" \
        -o "$out/$name" "$src" "$lib" "${system_libs[@]}"
done
echo "ABI programs in $out"
