#!/usr/bin/env bash
# Puts llama.cpp's source, as the PyPI sdist of llama-cpp-python carries it
# (vendor/llama.cpp; the version is pinned once, in
# llama-cpp-python.version beside this script), into DEST: what a CUDA
# build of the library, test-backend-ops, llama-simple and llama-bench
# reads, gguf-py (for our model generator) and one vocabulary
# (models/ggml-vocab-llama-spm.gguf), without the rest (other backends, the
# server and its web UI, the other vocabularies, docs), so it travels to
# the GPU machine, which has no network.
#
#   tests/llama/source.sh DEST     (e.g. .llama, ignored by git)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=$1
version=$(tr -d '[:space:]' < "$here/llama-cpp-python.version")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
python3 -m pip download -q --no-deps --no-binary llama-cpp-python "llama-cpp-python==$version" -d "$scratch"
tar xzf "$scratch"/llama_cpp_python-"$version".tar.gz -C "$scratch"
src=$scratch/llama_cpp_python-$version/vendor/llama.cpp
rm -rf "$dest" && mkdir -p "$dest/ggml/src" "$dest/tools" "$dest/models"
cp -r "$src"/{CMakeLists.txt,cmake,common,include,src,tests,vendor,examples,pocs,gguf-py,LICENSE} "$dest"/
cp -r "$src"/ggml/{CMakeLists.txt,cmake,include} "$dest/ggml/"
cp "$src"/ggml/src/*.c "$src"/ggml/src/*.cpp "$src"/ggml/src/*.h "$src"/ggml/src/CMakeLists.txt \
   "$src"/ggml/src/ggml-version.h.in "$dest/ggml/src/"
cp -r "$src"/ggml/src/{ggml-cpu,ggml-cuda} "$dest/ggml/src/"
# The tools CMake adds without LLAMA_BUILD_SERVER, GGML_RPC or Metal.
cp "$src"/tools/CMakeLists.txt "$dest/tools/"
for t in "$src"/tools/*/; do
    case $(basename "$t") in ui | cli | server | rpc | tuning) ;; *) cp -r "$t" "$dest/tools/" ;; esac
done
cp "$src"/models/ggml-vocab-llama-spm.gguf "$dest/models/"
echo "$version" > "$dest/llama-cpp-python.version"
echo "llama.cpp $version (from llama-cpp-python's sdist) in $dest: $(du -sh "$dest" | cut -f1)"
