#!/usr/bin/env bash
# One test-backend-ops case's runtime calls, NVIDIA's stack beside ours in
# one run (tests/device/case_cost.cu): cudaMalloc, an upload, the same
# upload again, a launch with a sync, a download, cudaFree, at three
# buffer sizes; stock, ours,
# stock, ours, and per phase the ratio of the better round of each. It
# says which call makes an op of the suite slower on ours.
#
#   tests/device/case-cost.sh OUTDIR [ROUNDS]
#
# Our libraries from target/device/cublas/lib (MACUDA_LIBS to change);
# OURS_ENV="K=V ..." for ours; OTHER_ENV="K=V ..." adds ours with those
# instead as a third side, each round, printed as other/stock and
# ours/other; LOAD=N busy loops beside every side (tests/device/rounds.sh).
# Appends to OUTDIR/case-cost.txt, each line labeled with the load.
set -u
cd "$(dirname "$0")/../.."
out=$1
shift
mkdir -p "$out"
. tests/device/rounds.sh
rounds case_cost "$@"
summary=$out/case-cost.txt
python3 - "$out" "${LOAD:-0}" "${OURS_ENV:-}" "${OTHER_ENV:-}" <<'PY' | tee -a "$summary"
import re, sys
out, load, ours_env, other_env = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
phases = ("malloc_us", "upload_us", "reupload_us", "launch_sync_us", "download_us", "free_us", "case_us")
def rounds(side):
    """{bytes: {phase: best value}} over the rounds that ended ok."""
    best = {}
    for r in (1, 2):
        try:
            t = open(f"{out}/{side}.{r}.txt").read()
        except FileNotFoundError:
            continue
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
other = rounds("other") if other_env else None
label = f"load {load}, ours '{ours_env}'" + (f", other '{other_env}'" if other_env else "")
if not stock or not ours or (other_env and not other):
    print(f"{label}: a side measured nothing right (stock rounds ok: {bool(stock)}, ours: {bool(ours)}"
          + (f", other: {bool(other)}" if other_env else "") + ")")
    sys.exit(1)
for size in sorted(stock):
    if size not in ours or (other and size not in other):
        print(f"{label}: {size} bytes: a side has no figures")
        continue
    s, o = stock[size], ours[size]
    if other:
        x = other[size]
        cells = [f"{p[:-3]} {s[p]:.1f}/{o[p]:.1f}/{x[p]:.1f} ({o[p] / s[p]:.2f}, {x[p] / s[p]:.2f})"
                 for p in phases]
        print(f"{label}: {size >> 10} KiB, us stock/ours/other (ours/stock, other/stock): " + ", ".join(cells))
    else:
        cells = [f"{p[:-3]} {s[p]:.1f}/{o[p]:.1f} ({o[p] / s[p]:.2f})" for p in phases]
        print(f"{label}: {size >> 10} KiB, us stock/ours (ours/stock): " + ", ".join(cells))
PY
