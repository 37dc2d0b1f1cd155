#!/usr/bin/env bash
# The ABI check on a GPU: every program under tests/cuda/abi that NVIDIA's
# runtime can run, once linked against ours (run with MACUDA_DEVICE=kernel,
# through NVIDIA's kernel module, no libcuda) and once against NVIDIA's
# static cudart (tests/device/build.sh builds both into target/device/abi).
# Their standard outputs must be byte-identical; this prints, per program,
# "identical" or the difference, and both sides' notes (stderr). Run from
# the repository root; writes $OUT/abi (default device-out/abi).
set -u
cd "$(dirname "$0")/../.."
bin=target/device/abi
out=${OUT:-device-out}/abi
mkdir -p "$out"
export MACUDA_REPORT_DIR=${MACUDA_REPORT_DIR:-/tmp/macuda-device-reports}
mkdir -p "$MACUDA_REPORT_DIR"
same=0
differ=0
for nv in "$bin"/*.nvidia; do
  name=$(basename "${nv%.nvidia}")
  timeout --kill-after=5 120 "$nv" >"$out/$name.nvidia.out" 2>"$out/$name.nvidia.err"
  theirs=$?
  MACUDA_DEVICE=kernel timeout --kill-after=5 120 "$bin/$name" >"$out/$name.ours.out" 2>"$out/$name.ours.err"
  ours=$?
  lines=$(wc -l <"$out/$name.nvidia.out")
  if cmp -s "$out/$name.nvidia.out" "$out/$name.ours.out" && [ "$theirs" = "$ours" ]; then
    same=$((same + 1))
    echo "== $name: identical ($lines lines, exit $ours)"
  else
    differ=$((differ + 1))
    echo "== $name: DIFFERENT (exit: NVIDIA $theirs, ours $ours)"
    diff -u "$out/$name.nvidia.out" "$out/$name.ours.out" | head -80
  fi
  echo "   notes, NVIDIA: $(tr '\n' ' ' <"$out/$name.nvidia.err" | cut -c1-400)"
  echo "   notes, ours:   $(tr '\n' ' ' <"$out/$name.ours.err" | cut -c1-400)"
done
echo "abi: $same identical, $differ different"
[ "$differ" -eq 0 ]
