#!/usr/bin/env bash
# One test-backend-ops case's runtime calls, NVIDIA's stack beside ours in
# one run (tests/device/case_cost.cu): cudaMalloc, an upload, a launch
# with a sync, a download, cudaFree, at three buffer sizes; stock, ours,
# stock, ours, and per phase the ratio of the better round of each. It
# says which call makes an op of the suite slower on ours.
#
#   tests/device/case-cost.sh OUTDIR [ROUNDS]
#
# Our libraries from target/device/cublas/lib (MACUDA_LIBS to change);
# OURS_ENV="K=V ..." for ours. Writes OUTDIR/case-cost.txt.
set -u
cd "$(dirname "$0")/../.."
out=$1
shift
mkdir -p "$out"
. tests/device/rounds.sh
rounds case_cost "$@"
summary=$out/case-cost.txt
: >"$summary"
python3 - "$out" <<'PY' | tee -a "$summary"
import re, sys
out = sys.argv[1]
phases = ("malloc_us", "upload_us", "launch_sync_us", "download_us", "free_us", "case_us")
def rounds(side):
    """{bytes: {phase: best value}} over the rounds that ended ok."""
    best = {}
    for r in (1, 2):
        t = open(f"{out}/{side}.{r}.txt").read()
        if "case_cost: ok" not in t:
            continue
        for line in t.splitlines():
            m = re.match(r"case_cost: bytes=(\d+) (.*)", line)
            if not m:
                continue
            vals = dict(kv.split("=") for kv in m.group(2).split())
            row = best.setdefault(int(m.group(1)), {})
            for p in phases:
                v = float(vals[p])
                row[p] = min(row.get(p, v), v)
    return best
stock, ours = rounds("stock"), rounds("ours")
if not stock or not ours:
    print(f"a side measured nothing right (stock rounds ok: {bool(stock)}, ours: {bool(ours)})")
    sys.exit(1)
for size in sorted(stock):
    if size not in ours:
        print(f"{size} bytes: ours has no figures")
        continue
    cells = [f"{p[:-3]} {stock[size][p]:.1f}/{ours[size][p]:.1f} ({ours[size][p] / stock[size][p]:.2f})"
             for p in phases]
    print(f"{size >> 10} KiB, us stock/ours (ours/stock): " + ", ".join(cells))
PY
