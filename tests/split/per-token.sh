#!/usr/bin/env bash
# What one decoded token costs the host, on the null device (seed notes
# §08): a program run twice (MACUDA_DEVICE=null, our runtime statically
# linked; kernels are loaded, launched and logged, not run), the runs
# differing only in the number of tokens decoded. Their difference, per
# token: kernel launches (MACUDA_LAUNCH_LOG: direct and graph replays),
# calls into the runtime and the time inside them (MACUDA_CALL_STATS),
# against the process's time. The program must print "decoded N tokens"
# (on stdout or stderr).
#
#   tests/split/per-token.sh [--keep DIR] NAME SHORT LONG PROGRAM [ARG...]
#
# NAME labels the report; an ARG containing @N@ gets the run's token count
# there. With --keep, each run's output, launch log and call stats stay in
# DIR/run-<tokens>/, and DIR/per-token.txt holds the per-token figures as
# `launches L graph G calls C host_ns H inside_ns I`.
# tests/split/null-decode.sh (llama-simple) and tests/split/check.sh (our
# decode-shaped program) run their measurements through this.
set -euo pipefail
keep=
if [ "${1:-}" = --keep ]; then
    keep=$2
    shift 2
fi
[ $# -ge 4 ] || { echo "usage: $0 [--keep DIR] NAME SHORT LONG PROGRAM [ARG...]" >&2; exit 2; }
name=$1 short=$2 long=$3
shift 3
if [ -n "$keep" ]; then
    mkdir -p "$keep"
    scratch=$keep
else
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
fi
program=$(basename "$1")

one() { # TOKENS PROGRAM [ARG...] -> prints: tokens launches graph_launches calls inside_ns since_ns
    local n=$1 d=$scratch/run-$1 a cmd=()
    shift
    for a in "$@"; do cmd+=("${a//@N@/$n}"); done
    mkdir -p "$d"
    MACUDA_DEVICE=null MACUDA_LAUNCH_LOG="$d/launches.jsonl" MACUDA_CALL_STATS="$d/calls.txt" \
        timeout --kill-after=5 600 "${cmd[@]}" >"$d/out.txt" 2>"$d/err.txt" \
        || { echo "$program for $n tokens on the null device failed:" >&2; tail -20 "$d/err.txt" >&2; exit 1; }
    local decoded
    decoded=$(cat "$d/out.txt" "$d/err.txt" | sed -n 's/.*decoded \([0-9]*\) tokens.*/\1/p' | tail -1)
    [ -n "$decoded" ] || { echo "no 'decoded N tokens' line from $program for $n tokens" >&2; tail -5 "$d/err.txt" >&2; exit 1; }
    [ -s "$d/calls.txt" ] || { echo "no call stats from the run of $n tokens" >&2; exit 1; }
    local launches graphs
    launches=$(wc -l < "$d/launches.jsonl")
    graphs=$(grep -c '"graph":true' "$d/launches.jsonl" || true)
    read -r _ calls _ inside _ since < "$d/calls.txt"
    echo "$decoded $launches $graphs $calls $inside $since"
}
first=$(one "$short" "$@")
second=$(one "$long" "$@")
read -r t1 l1 g1 c1 i1 s1 <<<"$first"
read -r t2 l2 g2 c2 i2 s2 <<<"$second"
[ "$t2" -gt "$t1" ] || { echo "the long run decoded $t2 tokens, the short $t1" >&2; exit 1; }
python3 - "$t1" "$l1" "$g1" "$c1" "$i1" "$s1" "$t2" "$l2" "$g2" "$c2" "$i2" "$s2" "$name" "${keep:+$keep/per-token.txt}" <<'PY'
import sys
t1, l1, g1, c1, i1, s1, t2, l2, g2, c2, i2, s2 = map(int, sys.argv[1:13])
name, figures = sys.argv[13], sys.argv[14]
dt = t2 - t1
launches, graphs, calls = (l2 - l1) / dt, (g2 - g1) / dt, (c2 - c1) / dt
inside, wall = (i2 - i1) / dt, (s2 - s1) / dt
print(f"null device, {name}: runs of {t1} and {t2} decoded tokens; per token (their difference / {dt}):")
print(f"  kernel launches   {launches:8.1f}   ({graphs:.1f} of them replayed from CUDA graphs)")
print(f"  runtime calls     {calls:8.1f}")
print(f"  host time         {wall / 1e3:8.1f} us, of which inside our runtime {inside / 1e3:.1f} us: {100 * inside / wall:.1f}%")
print(f"  whole runs: {l1} and {l2} launches, {c1} and {c2} calls")
if figures:
    with open(figures, "w") as f:
        f.write(f"launches {launches:g} graph {graphs:g} calls {calls:g} host_ns {wall:.0f} inside_ns {inside:.0f}\n")
PY
