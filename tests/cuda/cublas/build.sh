#!/usr/bin/env bash
# Builds the cuBLAS test programs beside this script, host code only, with
# g++ against NVIDIA's cuBLAS and runtime headers from PyPI (pinned in
# abi/cublas/tests/headers.sh):
#
#   NAME          linked against NVIDIA's libcublas.so.13 and libcudart.so.13
#                 (their sonames and symbol versions): run with NVIDIA's
#                 libraries, or with ours first on LD_LIBRARY_PATH
#   NAME.static   statuses only: linked against our libcublas.a and
#                 libcudart.a (given in LIBDIR, as abi/build-libs.sh lays
#                 them out)
#
#   tests/cuda/cublas/build.sh OUTDIR LIBDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
lib=$(cd "$2" && pwd)
root=$("$here/../../../abi/cublas/tests/headers.sh")
flags=(-std=c++17 -O2 -Wall -I "$root/include")
for name in statuses gemm_check gemm_bench sum_order; do
    g++ "${flags[@]}" -o "$out/$name" "$here/$name.cpp" -L "$root/lib" -l:libcublas.so.13 -l:libcudart.so.13
done
g++ "${flags[@]}" -o "$out/statuses.static" "$here/statuses.cpp" "$lib/libcublas.a" "$lib/libcudart.a" \
    -lpthread -ldl -lm -lrt -lgcc_s
echo "cuBLAS programs in $out"
