#!/usr/bin/env bash
# The whole host path of a decode with no GPU (seed notes §08): the split
# build's llama-simple on the null device (MACUDA_DEVICE=null, our runtime
# statically linked; kernels are loaded, launched and logged, not run, so
# the text is not the model's). Two runs that differ only in the number of
# tokens decoded; their difference, per token, is what one decoded token
# costs the host: kernel launches (MACUDA_LAUNCH_LOG: direct and graph
# replays), calls into the runtime and the time inside them
# (MACUDA_CALL_STATS), against the process's time.
#
#   tests/split/null-decode.sh BIN_DIR MODEL [SHORT LONG]   (default 8 and 40 tokens)
#
# The null device plays a GB202 (sm_120): BIN_DIR must be a split build for
# sm_120a (tests/split/build.sh --arch sm_120a).
set -euo pipefail
bin=$1/llama-simple
model=$2
short=${3:-8}
long=${4:-40}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
prompt="The history of the graphics processor begins"
one() { # TOKENS -> prints: tokens launches graph_launches calls inside_ns since_ns
    local n=$1 d=$scratch/run-$1
    mkdir -p "$d"
    MACUDA_DEVICE=null MACUDA_LAUNCH_LOG="$d/launches.jsonl" MACUDA_CALL_STATS="$d/calls.txt" \
        timeout --kill-after=5 600 "$bin" -m "$model" -n "$n" -ngl 99 "$prompt" >"$d/out.txt" 2>"$d/err.txt" \
        || { echo "llama-simple -n $n on the null device failed:" >&2; tail -20 "$d/err.txt" >&2; exit 1; }
    local decoded
    decoded=$(sed -n 's/.*decoded \([0-9]*\) tokens.*/\1/p' "$d/err.txt" | tail -1)
    [ -n "$decoded" ] || { echo "no 'decoded N tokens' line from llama-simple -n $n" >&2; tail -5 "$d/err.txt" >&2; exit 1; }
    [ -s "$d/calls.txt" ] || { echo "no call stats from the run of $n tokens" >&2; exit 1; }
    local launches graphs
    launches=$(wc -l < "$d/launches.jsonl")
    graphs=$(grep -c '"graph":true' "$d/launches.jsonl" || true)
    read -r _ calls _ inside _ since < "$d/calls.txt"
    echo "$decoded $launches $graphs $calls $inside $since"
}
read -r t1 l1 g1 c1 i1 s1 <<<"$(one "$short")"
read -r t2 l2 g2 c2 i2 s2 <<<"$(one "$long")"
[ "$t2" -gt "$t1" ] || { echo "the long run decoded $t2 tokens, the short $t1" >&2; exit 1; }
python3 - "$t1" "$l1" "$g1" "$c1" "$i1" "$s1" "$t2" "$l2" "$g2" "$c2" "$i2" "$s2" "$(basename "$model")" <<'PY'
import sys
t1, l1, g1, c1, i1, s1, t2, l2, g2, c2, i2, s2 = map(int, sys.argv[1:13])
model = sys.argv[13]
dt = t2 - t1
launches, graphs, calls = (l2 - l1) / dt, (g2 - g1) / dt, (c2 - c1) / dt
inside, wall = (i2 - i1) / dt, (s2 - s1) / dt
print(f"null device, {model}: runs of {t1} and {t2} decoded tokens; per token (their difference / {dt}):")
print(f"  kernel launches   {launches:8.1f}   ({graphs:.1f} of them replayed from CUDA graphs)")
print(f"  runtime calls     {calls:8.1f}")
print(f"  host time         {wall / 1e3:8.1f} us, of which inside our runtime {inside / 1e3:.1f} us: {100 * inside / wall:.1f}%")
print(f"  whole runs: {l1} and {l2} launches, {c1} and {c2} calls")
PY
