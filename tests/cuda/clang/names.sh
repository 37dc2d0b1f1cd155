#!/usr/bin/env bash
# Writes tests/cuda/clang/names.macos.txt: the kernel names a clang host
# compile of tests/cuda/names.cu for macOS (arm64-apple-macos) registers,
# one per line, as __cudaRegisterFunction receives them. Needs clang
# (Debian's clang-14 was used); no Mac.
#
#   tests/cuda/clang/names.sh [OUTDIR]     (default: beside this script)
#
# CLANG names the compiler (default: clang++-14, else clang++).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=$(mkdir -p "${1:-$here}" && cd "${1:-$here}" && pwd)
clang=${CLANG:-$(command -v clang++-14 || command -v clang++)}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# A stand-in device binary: clang embeds it unread.
printf 'not a fatbin' > "$scratch/dev.bin"
"$clang" -x cuda --cuda-host-only -target arm64-apple-macos -nocudainc -nocudalib -ffreestanding \
    -Xclang -target-sdk-version=11.5 -Xclang -fcuda-include-gpubinary -Xclang "$scratch/dev.bin" \
    -include "$here/shim.h" -S -emit-llvm -o "$scratch/names.ll" "$here/../names.cu"
# The names are the string constants __cudaRegisterFunction is passed.
grep -o 'c"_Z[^"]*\\00"\|c"plain_c\\00"' "$scratch/names.ll" | sed 's/^c"//; s/\\00"$//' | sort -u \
    > "$dest/names.macos.txt"
"$clang" --version | head -1 > "$dest/names.clang-version.txt"
cat "$dest/names.macos.txt"
