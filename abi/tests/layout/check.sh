#!/usr/bin/env bash
# Regenerates the cudart layout tables into a scratch directory and
# compares them with the committed ones; non-zero on any difference.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$here/generate.sh" "$scratch" >/dev/null
status=0
for f in cudart12-layout.json cudart13-layout.json; do
    cmp -s "$scratch/$f" "$here/../data/$f" || { echo "differs: $f"; status=1; }
done
[ "$status" = 0 ] && echo "cudart layouts: regenerated, identical"
exit "$status"
