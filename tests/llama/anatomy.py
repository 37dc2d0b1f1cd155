#!/usr/bin/env python3
"""Where a decode's time goes, token by token, from a GPU timeline of ours
(MACUDA_PROFILE's Chrome trace JSON, plain or gzipped).

A token's period is the time from one cudaGraphLaunch to the next (the
decode replays one graph a token). Within the median period it prints the
kernels, the GPU's busy time, when the first kernel starts and the last
ends after the launch, and the rest: the time from the GPU going idle to
the next token's launch (the caller's own code and our copies and syncs
in it). Over the whole trace it splits the seams between chains into
those where the next chain was handed over before the last one ended (the
hardware's own cost of a seam) and those where the GPU waited for the
hand-over, with the chain sizes of the late ones.

    anatomy.py TRACE.json[.gz]
"""
import gzip
import json
import statistics
import sys
from collections import Counter


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)["traceEvents"]


def kernels(events):
    return [e for e in events if e.get("ph") == "X" and e.get("pid") == 1 and e.get("tid") == 1]


def pushes(events):
    return [e for e in events if e.get("ph") == "i" and e.get("pid") == 2 and e["name"].startswith("push ")]


def host_calls(events, name):
    return sorted(e["ts"] for e in events if e.get("pid") == 2 and e.get("ph") == "X" and e.get("name") == name)


def end(k):
    return k["ts"] + k["dur"]


def token_period(events, ks):
    launches = host_calls(events, "cudaGraphLaunch")
    if len(launches) < 3:
        return ["fewer than 3 graph launches: no token period to read"]
    periods = [b - a for a, b in zip(launches, launches[1:])]
    mid = len(launches) // 2
    a, b = launches[mid], launches[mid + 1]
    inside = sorted((k for k in ks if a <= k["ts"] < b), key=lambda k: k["ts"])
    if not inside:
        return ["no kernels between two graph launches"]
    busy = sum(k["dur"] for k in inside)
    first = inside[0]["ts"] - a
    last = max(end(k) for k in inside) - a
    seams = sum(
        1 for x, y in zip(inside, inside[1:]) if x["args"].get("chain") != y["args"].get("chain")
    )
    return [
        f"token period (graph launch to graph launch): median {statistics.median(periods):.0f} us over {len(periods)} tokens",
        f"the median token: {len(inside)} kernels in {seams + 1} chains, GPU busy {busy:.0f} us; "
        f"first kernel {first:.0f} us after the launch, last one ends at {last:.0f} us; "
        f"then {b - a - last:.0f} us until the next token's launch",
    ]


def seams(events, ks):
    ps = sorted(pushes(events), key=lambda e: e["ts"])
    ordered = sorted(ks, key=lambda k: k["args"]["serial"])
    if len(ps) != len(ordered):
        return [f"{len(ps)} pushes for {len(ordered)} kernels: seams not read"]
    for k, p in zip(ordered, ps):
        k["pushed"] = p["ts"]
    chains = {}
    for k in ordered:
        chains.setdefault(k["args"]["chain"], []).append(k)
    ids = sorted(chains)
    early, late = [], []
    for a, b in zip(ids, ids[1:]):
        last_end = max(end(k) for k in chains[a])
        gap = min(k["ts"] for k in chains[b]) - last_end
        if gap < 0:
            continue
        handed = max(k["pushed"] for k in chains[b])
        if handed <= last_end:
            early.append(gap)
        else:
            late.append((gap, len(chains[b])))
    out = [f"{len(ids)} chains"]
    if early:
        out.append(
            f"seams with the next chain handed over in time: {len(early)}, gap median {statistics.median(early):.1f} us, "
            f"{sum(early):.0f} us in all"
        )
    if late:
        sizes = Counter(n for _, n in late).most_common(4)
        out.append(
            f"seams where the GPU waited for the hand-over: {len(late)}, gap median "
            f"{statistics.median(g for g, _ in late):.1f} us, {sum(g for g, _ in late):.0f} us in all; "
            f"sizes of the late chains: {', '.join(f'{n} launches x{c}' for n, c in sizes)}"
        )
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    events = load(sys.argv[1])
    ks = kernels(events)
    if not ks:
        sys.exit("no kernels in the trace")
    for line in token_period(events, ks) + seams(events, ks):
        print(line)


if __name__ == "__main__":
    main()
