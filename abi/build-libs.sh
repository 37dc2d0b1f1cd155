#!/usr/bin/env bash
# Lays out our CUDA runtime and cuBLAS as a program or a loader looks for
# NVIDIA's: libcudart.a and libcublas.a (for -lcudart / -lcublas at link
# time), and shared libraries with the sonames NVIDIA's have -
# libcudart.so.13 and .so.12, libcublas.so.13 and .so.12 - whose symbols
# carry the version node of the same name, so binaries linked against
# NVIDIA's (whose references are versioned) load ours in their place. Each
# libcublas.so.N needs libcudart.so.N: its kernels run on our runtime.
# libcudart.so and libcublas.so link to the CUDA 13 ones.
#
#   abi/build-libs.sh OUTDIR [--debug]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
profile=release
[ "${2:-}" = --debug ] && profile=debug
target=${CARGO_TARGET_DIR:-$root/target}

flags=()
[ "$profile" = release ] && flags=(--release)
"${CARGO:-cargo}" build -q "${flags[@]}" -p macuda-abi -p macuda-cublas --lib --manifest-path "$root/Cargo.toml"
lib="$target/$profile/libcudart.a"
cp "$lib" "$out/libcudart.a"

# Exported: the runtime's entry points (the C names CUDA code calls).
nm -g --defined-only "$lib" 2>/dev/null | awk '$2 == "T" { print $3 }' \
    | grep -E '^(cuda|__cuda)' | sort -u > "$out/exports.txt"
for version in 13 12; do
    map="$out/libcudart.so.$version.map"
    { echo "libcudart.so.$version {"; echo "  global:"
      sed 's/.*/    &;/' "$out/exports.txt"; echo "  local: *;"; echo "};"; } > "$map"
    gcc -shared -o "$out/libcudart.so.$version" -Wl,-soname,"libcudart.so.$version" \
        -Wl,--version-script="$map" -Wl,--whole-archive "$lib" -Wl,--no-whole-archive \
        -lpthread -ldl -lm -lrt -lgcc_s
done
ln -sf libcudart.so.13 "$out/libcudart.so"

blas="$target/$profile/libcublas.a"
cp "$blas" "$out/libcublas.a"
nm -g --defined-only "$blas" 2>/dev/null | awk '$2 == "T" { print $3 }' \
    | grep -E '^cublas' | sort -u > "$out/cublas-exports.txt"
for version in 13 12; do
    map="$out/libcublas.so.$version.map"
    { echo "libcublas.so.$version {"; echo "  global:"
      sed 's/.*/    &;/' "$out/cublas-exports.txt"; echo "  local: *;"; echo "};"; } > "$map"
    gcc -shared -o "$out/libcublas.so.$version" -Wl,-soname,"libcublas.so.$version" \
        -Wl,--version-script="$map" -Wl,--whole-archive "$blas" -Wl,--no-whole-archive \
        -L"$out" -l:"libcudart.so.$version" -Wl,-rpath,'$ORIGIN' -lpthread -ldl -lm -lrt -lgcc_s
done
ln -sf libcublas.so.13 "$out/libcublas.so"
echo "$(wc -l < "$out/exports.txt") runtime and $(wc -l < "$out/cublas-exports.txt") cuBLAS entry points; libraries in $out"
