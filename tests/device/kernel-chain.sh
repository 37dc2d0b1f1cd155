#!/usr/bin/env bash
# A decode token's shape, NVIDIA's stack beside ours in one run: the CUDA
# graph of small dependent kernels of tests/device/kernel_chain.cu,
# replayed with a sync after each, then launched one by one; stock, ours,
# stock, ours, and the ratio of the better round of each. It says what a
# small kernel costs the GPU on each stack (launch latency included),
# which llama.cpp's decode pays about 400 times a token.
#
#   tests/device/kernel-chain.sh OUTDIR [KERNELS REPLAYS BLOCKS]
#
# Our libraries from target/device/cublas/lib (MACUDA_LIBS to change);
# OURS_ENV="K=V ..." for ours. Writes OUTDIR/kernel-chain.txt.
set -u
cd "$(dirname "$0")/../.."
out=$1
shift
mkdir -p "$out"
. tests/device/rounds.sh
rounds kernel_chain "$@"
summary=$out/kernel-chain.txt
: >"$summary"
python3 - "$out" <<'PY' | tee -a "$summary"
import re, sys
out = sys.argv[1]
def best(side, key):
    vals = []
    for r in (1, 2):
        t = open(f"{out}/{side}.{r}.txt").read()
        m = re.search(rf"{key}=([0-9.]+)", t)
        if m and "kernel_chain: ok" in t:
            vals.append(float(m.group(1)))
    return min(vals) if vals else None
ok = True
for key in ("graph_kernel_ns", "graph_replay_us", "loop_kernel_ns"):
    s, o = best("stock", key), best("ours", key)
    if s is None or o is None:
        ok = False
        print(f"{key}: stock {s}, ours {o}: a side measured nothing right")
        continue
    print(f"{key}: stock {s:.1f}, ours {o:.1f}, ours/stock {o / s:.2f}")
sys.exit(0 if ok else 1)
PY
