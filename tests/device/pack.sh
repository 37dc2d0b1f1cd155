#!/usr/bin/env bash
# Packs what the device machine needs and cannot build or fetch itself
# into target/travel.tgz: what tests/device/build.sh put in target/device
# (our binaries, libraries and test programs) and llama.cpp's source in
# .llama (tests/llama/source.sh). Compressed it is about half of what may
# travel with the working tree; carry it, and unpack it there first:
#
#   tests/device/pack.sh                    (here, after build.sh)
#   tar xzf target/travel.tgz               (there, from the repository root)
set -euo pipefail
cd "$(dirname "$0")/../.."
parts=(target/device)
[ -e .llama/CMakeLists.txt ] && parts+=(.llama)
tar czf target/travel.tgz "${parts[@]}"
ls -l target/travel.tgz
