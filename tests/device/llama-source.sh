#!/usr/bin/env bash
# Puts llama.cpp's source, as the PyPI sdist of llama-cpp-python 0.3.36
# carries it (vendor/llama.cpp), into DEST, without what a CUDA build of
# the library and its tests does not read (other backends, the web UI,
# models, docs), so it travels to the GPU machine (which has no network).
#
#   tests/device/llama-source.sh DEST     (e.g. .llama, ignored by git)
set -euo pipefail
dest=$1
version=0.3.36
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
python3 -m pip download -q --no-deps --no-binary llama-cpp-python "llama-cpp-python==$version" -d "$scratch"
tar xzf "$scratch"/llama_cpp_python-$version.tar.gz -C "$scratch"
src=$scratch/llama_cpp_python-$version/vendor/llama.cpp
rm -rf "$dest" && mkdir -p "$dest/ggml/src" "$dest/tools"
cp -r "$src"/{CMakeLists.txt,cmake,common,include,src,tests,vendor,LICENSE} "$dest"/
cp -r "$src"/ggml/{CMakeLists.txt,cmake,include} "$dest/ggml/"
cp "$src"/ggml/src/*.c "$src"/ggml/src/*.cpp "$src"/ggml/src/*.h "$src"/ggml/src/CMakeLists.txt \
   "$src"/ggml/src/ggml-version.h.in "$dest/ggml/src/"
cp -r "$src"/ggml/src/{ggml-cpu,ggml-cuda} "$dest/ggml/src/"
echo "llama.cpp $version (from llama-cpp-python's sdist) in $dest: $(du -sh "$dest" | cut -f1)"
