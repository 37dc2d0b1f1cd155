#!/usr/bin/env bash
# The GPU test binaries tests/device/build.sh puts in target/device (gpu,
# kernel_rm), each under LIMIT seconds (default 300), from the repository
# root on the GPU machine. Writes OUT/NAME.txt and prints a line each.
#
#   tests/device/gpu-tests.sh OUT [LIMIT]
set -u
out=$1
limit=${2:-300}
for t in gpu kernel_rm; do
  [ -x "target/device/$t" ] || { echo "$t: not carried"; continue; }
  timeout --kill-after=5 "$limit" "target/device/$t" --include-ignored --nocapture --test-threads=1 \
    >"$out/$t.txt" 2>&1
  echo "$t: exit $? ($(grep -h '^test result' "$out/$t.txt" | tail -1))"
done
