#!/usr/bin/env bash
# What each of our settings gives llama.cpp's decode: llama-bench tg128
# (128 generated tokens, no prompt) on each model, NVIDIA's stack (stock)
# and ours under each variant's environment, interleaved in two rounds,
# each side's better round and its ratio to stock. It sets the design
# changes of the performance issue side by side in one run, each against
# the default it would replace.
#
#   tests/llama/variants.sh BUILD LIBDIR OUTDIR MODEL...
#
# VARIANTS="NAME=K=V+K=V NAME=..." replaces the default set (our knobs,
# abi/src/knobs.rs; "default=" is ours as it is). Writes
# OUTDIR/variants-MODEL.SIDE.ROUND.json and appends the table to
# OUTDIR/variants.txt. Exit 1 when a side measured nothing.
set -u -o pipefail
build=$1
lib=$2
out=$3
shift 3
mkdir -p "$out"
bin=$build/bin/llama-bench
variants=${VARIANTS:-"default= \
staged-uploads=MACUDA_SMALL_UPLOADS=staged \
no-prefetch=MACUDA_CHAIN_PREFETCH=none \
invalidate-all=MACUDA_LAUNCH_INVALIDATE=all \
graph-nodes=MACUDA_GRAPH_REPLAY=nodes"}
args=(-p 0 -n 128 -ngl 99 -r 3 -o json)
for model in "$@"; do
  name=$(basename "$model" .gguf)
  for round in 1 2; do
    timeout --kill-after=5 300 "$bin" -m "$model" "${args[@]}" >"$out/variants-$name.stock.$round.json" \
      2>"$out/variants-$name.stock.$round.err"
    for v in $variants; do
      side=${v%%=*}
      read -r -a env_v <<<"$(printf '%s' "${v#*=}" | tr '+' ' ')"
      env "${env_v[@]}" MACUDA_DEVICE=kernel LD_LIBRARY_PATH="$lib" timeout --kill-after=5 300 \
        "$bin" -m "$model" "${args[@]}" >"$out/variants-$name.$side.$round.json" \
        2>"$out/variants-$name.$side.$round.err"
    done
  done
done
python3 - "$out" "$variants" "$@" <<'PY' | tee -a "$out/variants.txt"
import json, os, sys
out, variants, models = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
sides = ["stock"] + [v.split("=", 1)[0] for v in variants]
envs = {v.split("=", 1)[0]: v.split("=", 1)[1].replace("+", " ") for v in variants}
missing = 0
print("llama-bench tg128, tok/s (better of two rounds) and ratio to stock")
for model in models:
    name = os.path.basename(model)
    name = name[:-len(".gguf")] if name.endswith(".gguf") else name
    best = {}
    for side in sides:
        for r in (1, 2):
            try:
                rows = json.load(open(f"{out}/variants-{name}.{side}.{r}.json"))
            except (OSError, ValueError):
                continue
            for row in rows:
                best[side] = max(best.get(side, 0.0), float(row["avg_ts"]))
    s = best.get("stock")
    for side in sides:
        x = best.get(side)
        missing += not x
        ratio = f"{x / s:.2f}" if s and x else "missing"
        note = f"  ({envs[side] or 'ours as it is'})" if side in envs else ""
        print(f"  {name:<24} {side:<16} {x or 0:>9.1f} {ratio:>7}{note}")
sys.exit(1 if missing else 0)
PY
