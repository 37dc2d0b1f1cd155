#!/usr/bin/env bash
# What each of our chain settings costs a chain of small dependent kernels
# on the GPU, beside NVIDIA's stack, in one run: tests/device/kernel_chain.cu
# (a CUDA graph of small kernels, each reading what the one before wrote,
# then the same kernels launched one by one) on stock and on ours with each
# variant's environment, two rounds, each side's better round; the check
# that every kernel ran once is the program's own (`ok` or `FAILED`), so a
# variant that makes a kernel read a stale value shows as FAILED.
#
#   tests/device/chain-variants.sh OUTDIR [KERNELS REPLAYS BLOCKS...]
#
# VARIANTS="NAME=K=V+K=V NAME=..." replaces the default set (our knobs,
# abi/src/knobs.rs). Our libraries from target/device/cublas/lib
# (MACUDA_LIBS to change). Writes OUTDIR/chain-variants.txt.
set -u
cd "$(dirname "$0")/../.."
out=$1
kernels=${2:-400}
replays=${3:-200}
shift $(($# < 3 ? $# : 3))
blocks=("${@:-8}")
[ ${#blocks[@]} -eq 0 ] && blocks=(8)
mkdir -p "$out"
lib=${MACUDA_LIBS:-target/device/cublas/lib}
nvcc=${NVCC:-$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)}
bin=$out/kernel_chain
"$nvcc" -O2 -arch=sm_90 -cudart shared -o "$bin" tests/device/kernel_chain.cu || { echo "nvcc failed"; exit 1; }
variants=${VARIANTS:-"default= \
no-prefetch=MACUDA_CHAIN_PREFETCH=none \
invalidate-all=MACUDA_LAUNCH_INVALIDATE=all \
nodes=MACUDA_GRAPH_REPLAY=nodes \
link-schedule=MACUDA_CHAIN_LINK=schedule \
membar-gpu=MACUDA_CHAIN_MEMBAR=gpu \
profile=MACUDA_PROFILE=/tmp/macuda-chain-variants-profile.json"}
for b in "${blocks[@]}"; do
  for round in 1 2; do
    timeout 120 "$bin" "$kernels" "$replays" "$b" >"$out/b$b.stock.$round.txt" 2>&1
    for v in $variants; do
      name=${v%%=*}
      read -r -a env_v <<<"$(printf '%s' "${v#*=}" | tr '+' ' ')"
      env "${env_v[@]}" MACUDA_DEVICE=kernel LD_LIBRARY_PATH="$lib" timeout 120 \
        "$bin" "$kernels" "$replays" "$b" >"$out/b$b.$name.$round.txt" 2>&1
    done
  done
done
python3 - "$out" "$variants" "${blocks[@]}" <<'PY' | tee "$out/chain-variants.txt"
import re, sys
out, variants, blocks = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
names = ["stock"] + [v.split("=", 1)[0] for v in variants]
def best(b, side, key):
    vals, status = [], []
    for r in (1, 2):
        try:
            t = open(f"{out}/b{b}.{side}.{r}.txt").read()
        except OSError:
            t = ""
        m = re.search(rf"{key}=([0-9.]+)", t)
        ok = "kernel_chain: ok" in t
        status.append("ok" if ok else ("FAILED" if "FAILED" in t else "no result"))
        if m and ok:
            vals.append(float(m.group(1)))
    return (min(vals) if vals else None), "/".join(status)
for b in blocks:
    print(f"blocks={b}: ns a kernel (better of two rounds), ratio to stock, each round's check")
    ref = {k: best(b, "stock", k)[0] for k in ("graph_kernel_ns", "loop_kernel_ns")}
    for n in names:
        g, st = best(b, n, "graph_kernel_ns")
        l, _ = best(b, n, "loop_kernel_ns")
        def fmt(v, r):
            return "      -" if v is None else f"{v:7.1f}" + ("" if r is None else f" ({v / r:4.2f}x)")
        print(f"  {n:22s} graph {fmt(g, ref['graph_kernel_ns'])}  loop {fmt(l, ref['loop_kernel_ns'])}  {st}")
PY
