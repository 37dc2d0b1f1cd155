#!/usr/bin/env bash
# Runs llama.cpp's test-backend-ops for the named ops on the CUDA backend
# twice: on NVIDIA's stack (stock) and on ours (MACUDA_DEVICE=kernel, our
# libcudart.so.13 and libcublas.so.13 first on LD_LIBRARY_PATH), and says,
# per op, how many cases each passed and which cases stock passes and we
# do not. Writes OUTDIR/ops-<op>.{stock,ours}.txt and OUTDIR/ops.txt.
#
#   tests/device/llama-ops.sh BUILD LIBDIR OUTDIR OP...
set -u
build=$1
lib=$2
out=$3
shift 3
mkdir -p "$out"
bin=$build/bin/test-backend-ops
summary=$out/ops.txt
: >"$summary"
for op in "$@"; do
  timeout --kill-after=5 300 "$bin" test -o "$op" -b CUDA0 >"$out/ops-$op.stock.txt" 2>&1
  rc_s=$?
  MACUDA_DEVICE=kernel LD_LIBRARY_PATH="$lib" timeout --kill-after=5 300 "$bin" test -o "$op" -b CUDA0 \
    >"$out/ops-$op.ours.txt" 2>&1
  rc_o=$?
  for side in stock ours; do
    sed 's/\x1b\[[0-9;]*m//g' "$out/ops-$op.$side.txt" >"$out/ops-$op.$side.plain"
  done
  # A case's line: "[details]  OP(params): OK|FAIL".
  count() { grep -cE "(^| )$op\(.*\): (.* )?OK$" "${1%.txt}.plain"; }
  fails() { grep -E "(^| )$op\(.*\): (.* )?FAIL$" "${1%.txt}.plain" | sed -E "s/.*($op\(.*\)): .*/\1/" | sort; }
  total() { grep -cE "(^| )$op\(.*\): (.* )?(OK|FAIL)$" "${1%.txt}.plain"; }
  stock_ok=$(count "$out/ops-$op.stock.txt"); ours_ok=$(count "$out/ops-$op.ours.txt")
  regressions=$(comm -13 <(fails "$out/ops-$op.stock.txt") <(fails "$out/ops-$op.ours.txt") | wc -l)
  missing=$(( $(total "$out/ops-$op.stock.txt") - $(total "$out/ops-$op.ours.txt") ))
  echo "$op: stock $stock_ok/$(total "$out/ops-$op.stock.txt") (exit $rc_s), ours $ours_ok/$(total "$out/ops-$op.ours.txt") (exit $rc_o); failing only on ours: $regressions; cases ours did not reach: $missing" | tee -a "$summary"
  comm -13 <(fails "$out/ops-$op.stock.txt") <(fails "$out/ops-$op.ours.txt") | head -10 | tee -a "$summary"
done
