#!/usr/bin/env bash
# Build what the device checks run (x86_64 Linux, same as the device
# machine) into target/device, so it can be carried there.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=target/device
mkdir -p "$out"
target=${CARGO_TARGET_DIR:-target}
cargo build --release -p macuda-supervisor --bin macuda
cargo build --release -p macuda-tests --bin capture-cuda
cp "$target/release/macuda" "$target/release/capture-cuda" "$out/"
# The test binaries that need a GPU, by name.
for t in gpu kernel_rm; do
  cargo test --release -p macuda-tests --test "$t" --no-run --message-format=json \
    | python3 -c '
import json, sys
name = sys.argv[1]
for line in sys.stdin:
    m = json.loads(line)
    t = m.get("target", {})
    if m.get("reason") == "compiler-artifact" and m.get("executable") \
            and t.get("name") == name and "test" in t.get("kind", []):
        print(m["executable"])
' "$t" | xargs -I{} cp {} "$out/$t"
done
# The ABI programs, linked against our runtime and against NVIDIA's
# (tests/device/abi.sh compares the two).
cargo build --release -p macuda-abi --lib
tests/cuda/abi/build.sh target/abi-device "$target/release/libcudart.a" --nvidia
mkdir -p "$out/abi"
for p in target/abi-device/*.nvidia; do
  name=$(basename "${p%.nvidia}")
  cp "target/abi-device/$name" "$p" "$out/abi/"
done
# Our cuBLAS: the shared libraries (ours, in place of NVIDIA's) and the
# programs tests/device/cublas.sh runs on both.
bash abi/build-libs.sh target/libs-device
mkdir -p "$out/cublas/lib"
cp target/libs-device/libcudart.so.13 target/libs-device/libcublas.so.13 "$out/cublas/lib/"
tests/cuda/cublas/build.sh "$out/cublas" target/libs-device
# Debug info would not fit what travels to the device machine.
strip "$out"/* "$out"/abi/* "$out"/cublas/* "$out"/cublas/lib/* 2>/dev/null || true
ls -l "$out"
