#!/usr/bin/env python3
"""Where a decode's time goes, token by token, from a GPU timeline of ours
(MACUDA_PROFILE's Chrome trace JSON, plain or gzipped) or of NVIDIA's stack
(tests/device/cupti_trace.c writes the same layout from CUPTI).

A token's period is the time from one cudaGraphLaunch to the next (the
decode replays one graph a token). Within the median period it prints the
kernels, the GPU's busy time, when the first kernel starts and the last
ends after the launch, and the rest: the time from the GPU going idle to
the next token's launch (the caller's own code and our copies and syncs
in it). Over the whole trace it splits the seams between chains into
those where the next chain was handed over before the last one ended (the
hardware's own cost of a seam) and those where the GPU waited for the
hand-over, with the chain sizes of the late ones.

With --against STOCK.json[.gz], both are read the same way and set side
by side: the median token of each, the time in each runtime call within
it, and, per kernel family (the demangled name up to its template or
parameter list), how many a token runs and the median step a kernel
takes (from the end of the kernel before it in the token to its own end,
so a launch's own latency is in it, as ours measures), with what each
family costs a token on either side.

    anatomy.py TRACE.json[.gz] [--against STOCK.json[.gz]]
"""
import gzip
import json
import re
import shutil
import statistics
import subprocess
import sys
from collections import Counter, defaultdict


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


def tokens(events, ks):
    """Each token's kernels (launch to next launch), in order of their end."""
    launches = host_calls(events, "cudaGraphLaunch")
    ordered = sorted(ks, key=end)
    out = []
    for a, b in zip(launches, launches[1:]):
        out.append((a, b, [k for k in ordered if a <= k["ts"] < b]))
    return out


def demangled(names):
    """Mangled name -> demangled, through c++filt where there is one."""
    names = sorted(set(names))
    tool = shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    r = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True)
    lines = r.stdout.split("\n")
    if r.returncode != 0 or len(lines) < len(names):
        return {n: n for n in names}
    return dict(zip(names, lines))


def family(name):
    """A kernel's family: its demangled name without return type, template
    arguments or parameters."""
    base = re.split(r"[<(]", name, maxsplit=1)[0].strip()
    return base.split(" ")[-1] if base else name


def steps(events, ks):
    """Per family: kernels a token, and each kernel's step (end of the one
    before it in its token to its own end) over every token but the first
    and last."""
    names = demangled(k["args"].get("mangled", k["name"]) for k in ks)
    per_family = defaultdict(list)
    counts = defaultdict(list)
    ts = tokens(events, ks)[1:-1]
    for _, _, inside in ts:
        seen = Counter()
        for prev, k in zip([None] + inside, inside):
            f = family(names[k["args"].get("mangled", k["name"])])
            step = end(k) - (end(prev) if prev else k["ts"])
            per_family[f].append(step)
            seen[f] += 1
        for f in per_family:
            counts[f].append(seen[f])
    return {
        f: (statistics.median(counts[f]), statistics.median(v), sum(v) / max(len(ts), 1))
        for f, v in per_family.items()
    }


def calls_in_median_token(events):
    """Time in each runtime call within the median token's period."""
    launches = host_calls(events, "cudaGraphLaunch")
    if len(launches) < 3:
        return {}
    mid = len(launches) // 2
    a, b = launches[mid], launches[mid + 1]
    spent = Counter()
    for e in events:
        if e.get("pid") == 2 and e.get("ph") == "X" and a <= e["ts"] < b and e.get("tid", 0) >= 200:
            spent[e["name"]] += e["dur"]
    return spent


def compare(ours_events, stock_events):
    out = []
    for label, ev in (("stock", stock_events), ("ours", ours_events)):
        for line in token_period(ev, kernels(ev)):
            out.append(f"{label}: {line}")
    calls_s, calls_o = calls_in_median_token(stock_events), calls_in_median_token(ours_events)
    out.append("runtime calls in the median token, us (stock / ours):")
    for name in sorted(set(calls_s) | set(calls_o), key=lambda n: -max(calls_s[n], calls_o[n]))[:10]:
        out.append(f"  {name:32s} {calls_s[name]:9.1f} / {calls_o[name]:9.1f}")
    fs, fo = steps(stock_events, kernels(stock_events)), steps(ours_events, kernels(ours_events))
    out.append("per kernel family: a token's kernels, the median step (us), a token's total (us); stock / ours")
    rows = sorted(set(fs) | set(fo), key=lambda f: -max(fs.get(f, (0, 0, 0))[2], fo.get(f, (0, 0, 0))[2]))
    total_s = total_o = 0.0
    for f in rows[:16]:
        cs, ms, ts = fs.get(f, (0, 0, 0))
        co, mo, to = fo.get(f, (0, 0, 0))
        out.append(f"  {f[:40]:40s} {cs:5.0f} / {co:5.0f}  {ms:7.2f} / {mo:7.2f}  {ts:8.1f} / {to:8.1f}")
    for f in rows:
        total_s += fs.get(f, (0, 0, 0))[2]
        total_o += fo.get(f, (0, 0, 0))[2]
    out.append(f"  {'all kernels':40s} {'':13s}  {'':17s}  {total_s:8.1f} / {total_o:8.1f}")
    return out


def main():
    args = sys.argv[1:]
    against = None
    if len(args) == 3 and args[1] == "--against":
        against = args[2]
        args = args[:1]
    if len(args) != 1:
        sys.exit(__doc__)
    events = load(args[0])
    ks = kernels(events)
    if not ks:
        sys.exit("no kernels in the trace")
    if against:
        stock = load(against)
        if not kernels(stock):
            sys.exit(f"no kernels in {against}")
        for line in compare(events, stock):
            print(line)
        return
    for line in token_period(events, ks) + seams(events, ks):
        print(line)


if __name__ == "__main__":
    main()
