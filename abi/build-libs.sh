#!/usr/bin/env bash
# Lays out our CUDA runtime as a program or a loader looks for NVIDIA's:
# libcudart.a (for -lcudart at link time), and shared libraries with the
# sonames NVIDIA's runtime has - libcudart.so.13 and libcudart.so.12 - whose
# symbols carry the version node of the same name, so binaries linked
# against NVIDIA's (whose references are versioned) load ours in its place.
# libcudart.so links to the CUDA 13 one.
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
"${CARGO:-cargo}" build -q "${flags[@]}" -p macuda-abi --lib --manifest-path "$root/Cargo.toml"
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
echo "$(wc -l < "$out/exports.txt") entry points; libraries in $out"
