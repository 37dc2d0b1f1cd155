#!/usr/bin/env python3
"""A picture of one decode token from a GPU timeline of ours (MACUDA_PROFILE's
Chrome trace JSON, plain or gzipped): the median token's period, from one
cudaGraphLaunch to the next, with the GPU's compute queue (kernels coloured
by family, chain starts marked), its copy queue, and the caller in our
entry points (syncs, copies, the graph launch) on one time axis. Needs
matplotlib (any recent version).

    token_picture.py TRACE.json[.gz] OUT.png [TITLE]
"""
import gzip
import json
import sys

FAMILIES = [
    ("mul_mat_vec", "matrix x vector", "#1f77b4"),
    ("mul_mat", "matrix x matrix", "#17becf"),
    ("quantize", "quantize", "#ff7f0e"),
    ("rms_norm", "rms_norm", "#2ca02c"),
    ("flash_attn", "flash attention", "#d62728"),
    ("rope", "rope", "#9467bd"),
    ("set_rows", "set_rows", "#8c564b"),
]
OTHER = ("other", "#7f7f7f")
HOST = {
    "cudaStreamSynchronize": "#bcbd22",
    "cudaMemcpyAsync": "#e377c2",
    "cudaGraphLaunch": "#000000",
}


def family(name):
    for key, label, colour in FAMILIES:
        if key in name:
            return label, colour
    return OTHER


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)["traceEvents"]


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    events = load(sys.argv[1])
    kernels = [e for e in events if e.get("ph") == "X" and e.get("pid") == 1 and e.get("tid") == 1]
    copies = [e for e in events if e.get("ph") == "X" and e.get("pid") == 1 and e.get("tid") == 2]
    host = [e for e in events if e.get("ph") == "X" and e.get("pid") == 2 and e.get("name") in HOST]
    launches = sorted(e["ts"] for e in host if e["name"] == "cudaGraphLaunch")
    if len(launches) < 3:
        sys.exit("fewer than 3 graph launches in the trace")
    mid = len(launches) // 2
    a, b = launches[mid], launches[mid + 1]

    def inside(e):
        return e["ts"] + e.get("dur", 0) > a and e["ts"] < b

    ks = sorted((k for k in kernels if inside(k)), key=lambda k: k["ts"])
    fig, ax = plt.subplots(figsize=(14, 3.2), dpi=110)
    rows = {"compute queue": 2, "copy queue": 1, "host: our entry points": 0}
    seen = {}
    for k in ks:
        label, colour = family(k["name"])
        bar = ax.broken_barh([(k["ts"] - a, k["dur"])], (rows["compute queue"] - 0.35, 0.7), color=colour)
        seen.setdefault(label, bar)
    for x, y in zip(ks, ks[1:]):
        if x["args"].get("chain") != y["args"].get("chain"):
            ax.axvline(y["ts"] - a, ymin=0.68, ymax=0.98, color="black", linewidth=0.6)
    for c in copies:
        if inside(c):
            ax.broken_barh([(c["ts"] - a, c["dur"])], (rows["copy queue"] - 0.35, 0.7), color="#e377c2")
    for h in host:
        if inside(h):
            bar = ax.broken_barh([(h["ts"] - a, max(h["dur"], 1.0))], (rows["host: our entry points"] - 0.35, 0.7),
                                 color=HOST[h["name"]])
            seen.setdefault(h["name"], bar)
    busy = sum(k["dur"] for k in ks)
    last_end = max(k["ts"] + k["dur"] for k in ks) - a
    title = sys.argv[3] if len(sys.argv) == 4 else "one decode token"
    ax.set_title(
        f"{title}: {b - a:.0f} us from graph launch to the next; {len(ks)} kernels, GPU busy {busy:.0f} us; "
        f"idle {b - a - last_end:.0f} us after the last kernel (chain starts marked)",
        fontsize=9,
    )
    ax.set_yticks(list(rows.values()))
    ax.set_yticklabels(list(rows.keys()), fontsize=8)
    ax.set_xlim(0, b - a)
    ax.set_xlabel("us after cudaGraphLaunch", fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    ax.legend(seen.values(), seen.keys(), fontsize=7, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.28),
              frameon=False)
    fig.tight_layout()
    fig.savefig(sys.argv[2])


if __name__ == "__main__":
    main()
