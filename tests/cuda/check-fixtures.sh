#!/usr/bin/env bash
# Rebuilds the loader fixtures from the CUDA sources with the pinned PyPI
# toolchain into a scratch directory and compares them, file by file, with
# the committed ones. Exits non-zero on any difference.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$here/build-fixtures.sh" "$scratch" >/dev/null
status=0
for f in "$scratch"/*; do
    name=$(basename "$f")
    if ! cmp -s "$f" "$here/fixtures/$name"; then
        echo "differs: $name"
        status=1
    fi
done
for f in "$here"/fixtures/*; do
    [ -e "$scratch/$(basename "$f")" ] || { echo "not rebuilt: $(basename "$f")"; status=1; }
done
[ "$status" = 0 ] && echo "fixtures: $(ls "$scratch" | wc -l) files rebuilt, identical"
exit "$status"
