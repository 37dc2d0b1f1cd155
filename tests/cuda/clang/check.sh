#!/usr/bin/env bash
# Regenerates the clang names into a scratch directory and compares them
# with the committed ones; non-zero on any difference.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$here/names.sh" "$scratch" >/dev/null 2>&1
for f in names.macos.txt names.clang-version.txt; do
    cmp -s "$scratch/$f" "$here/$f" || { echo "differs: $f"; diff "$here/$f" "$scratch/$f" || true; exit 1; }
done
echo "clang names for macOS: regenerated, identical"
