"""Ratios of GEMM throughput, ours over NVIDIA's, from gemm_bench outputs
(tests/cuda/cublas/gemm_bench.cpp) of runs interleaved in the same
minutes: each shape's best time over the runs of each side.

    python3 ratios.py NVIDIA_RUN... -- OUR_RUN...
"""
import re
import sys

LINE = re.compile(r"^bench (.+) ms=([0-9.]+) tflops=([0-9.]+)$")


def best(paths):
    times = {}
    order = []
    for path in paths:
        with open(path) as f:
            for line in f:
                m = LINE.match(line.strip())
                if not m:
                    continue
                name, ms = m.group(1), float(m.group(2))
                if name not in times:
                    order.append(name)
                times[name] = min(times.get(name, ms), ms)
    return times, order


def main(argv):
    if "--" not in argv:
        sys.exit("usage: ratios.py NVIDIA_RUN... -- OUR_RUN...")
    cut = argv.index("--")
    theirs, order = best(argv[:cut])
    ours, _ = best(argv[cut + 1 :])
    flops = {}
    for path in argv[:cut]:
        with open(path) as f:
            for line in f:
                m = LINE.match(line.strip())
                if m:
                    flops[m.group(1)] = float(m.group(3)) * float(m.group(2))
    print(f"{'shape':40s} {'NVIDIA TFLOP/s':>15s} {'ours TFLOP/s':>13s} {'ours/NVIDIA':>12s}")
    for name in order:
        if name not in ours:
            print(f"{name:40s} {'':>15s} {'missing':>13s}")
            continue
        work = flops[name]  # TFLOP/s x ms: the shape's work, in units of 1e9 FLOP
        t, o = work / theirs[name], work / ours[name]
        print(f"{name:40s} {t:15.1f} {o:13.1f} {theirs[name] / ours[name]:12.2f}")
    missing = [n for n in order if n not in ours]
    print(f"cublas-bench: {len(order) - len(missing)} shapes compared, {len(missing)} missing")


if __name__ == "__main__":
    main(sys.argv[1:])
