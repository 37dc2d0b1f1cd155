#!/usr/bin/env bash
# llama-bench pp512 and tg128 on each model, NVIDIA's stack (stock) and
# ours interleaved in the same minutes (stock, ours, stock, ours), and the
# ratio ours / stock of the better of each side's two rounds.
#
#   tests/llama/bench.sh BUILD LIBDIR OUTDIR MODEL...
#
# OURS_ENV as for ops.sh. OTHER_ENV="K=V ...": a third side, ours with
# those variables instead (MACUDA_GRAPH_REPLAY=nodes, say), in every round
# after ours, with its own column and ratio. Writes
# OUTDIR/bench-NAME.SIDE.ROUND.json and appends the table to
# OUTDIR/bench.txt. Exit 1 when a side measured nothing for a test.
set -u -o pipefail
build=$1
lib=$2
out=$3
shift 3
mkdir -p "$out"
bin=$build/bin/llama-bench
# OURS_BIN=DIR: ours runs DIR/llama-bench (the split build, linked statically
# against our libraries) instead of stock's binary over our shared ones.
ours_bin=${OURS_BIN:+$OURS_BIN/llama-bench}
ours_bin=${ours_bin:-$bin}
read -r -a ours_env <<<"${OURS_ENV:-}"
read -r -a other_env <<<"${OTHER_ENV:-}"
args=(-p 512 -n 128 -ngl 99 -r 3 -o json)
for model in "$@"; do
  name=$(basename "$model" .gguf)
  for round in 1 2; do
    timeout --kill-after=5 600 "$bin" -m "$model" "${args[@]}" >"$out/bench-$name.stock.$round.json" \
      2>"$out/bench-$name.stock.$round.err"
    env "${ours_env[@]}" MACUDA_DEVICE=kernel LD_LIBRARY_PATH="$lib" timeout --kill-after=5 600 \
      "$ours_bin" -m "$model" "${args[@]}" >"$out/bench-$name.ours.$round.json" 2>"$out/bench-$name.ours.$round.err"
    if [ ${#other_env[@]} -gt 0 ]; then
      env "${other_env[@]}" MACUDA_DEVICE=kernel LD_LIBRARY_PATH="$lib" timeout --kill-after=5 600 \
        "$bin" -m "$model" "${args[@]}" >"$out/bench-$name.other.$round.json" 2>"$out/bench-$name.other.$round.err"
    fi
  done
done
python3 - "$out" "${OTHER_ENV:-}" "$@" <<'PY' | tee -a "$out/bench.txt"
import json, os, sys
out, other = sys.argv[1], sys.argv[2]
sides = ("stock", "ours") + (("other",) if other else ())
missing = 0
head = f"{'model':<28} {'test':<6} {'stock t/s':>10} {'ours t/s':>10} {'ours/stock':>10}"
if other:
    head += f" {'other t/s':>10} {'other/stock':>11}   (other: ours with {other})"
print(head)
for model in sys.argv[3:]:
    name = os.path.basename(model)[:-len(".gguf")] if model.endswith(".gguf") else os.path.basename(model)
    best = {}
    for side in sides:
        for r in (1, 2):
            try:
                rows = json.load(open(f"{out}/bench-{name}.{side}.{r}.json"))
            except (OSError, ValueError):
                continue
            for row in rows:
                test = f"pp{row['n_prompt']}" if row.get("n_gen", 0) == 0 else f"tg{row['n_gen']}"
                key = (test, side)
                best[key] = max(best.get(key, 0.0), float(row["avg_ts"]))
    for test in ("pp512", "tg128"):
        s, o = best.get((test, "stock")), best.get((test, "ours"))
        ratio = f"{o / s:.2f}" if s and o else "missing"
        missing += not (s and o)
        line = f"{name:<28} {test:<6} {s or 0:>10.1f} {o or 0:>10.1f} {ratio:>10}"
        if other:
            x = best.get((test, "other"))
            missing += not x
            line += f" {x or 0:>10.1f} {(f'{x / s:.2f}' if s and x else 'missing'):>11}"
        print(line)
sys.exit(1 if missing else 0)
PY
