#!/usr/bin/env bash
# Where does our computation first leave stock's? Runs llama.cpp's
# llama-eval-callback (which prints every tensor the graph computes, a few
# of its values and its sum) on MODEL with PROMPT, on NVIDIA's stack and on
# ours, and names the first tensor whose printout differs: the op to look
# at when a greedy decode differs but the op suite passes (its tolerance
# hides what a byte-compare of the text does not).
#
#   tests/llama/diverge.sh BUILD LIBDIR OUTDIR MODEL
#
# Writes OUTDIR/NAME.{stock,ours}.log and prints one line. Exit 0 when the
# two printouts agree, 1 when they differ, 2 when a run failed.
set -u
build=$1
lib=$2
out=$3
model=$4
mkdir -p "$out"
bin=$build/bin/llama-eval-callback
prompt=${PROMPT:-"The history of the graphics processor begins"}
name=$(basename "$model" .gguf)
run() { timeout --kill-after=5 300 "$bin" -m "$model" -p "$prompt" -n 1 -ngl 99 "$@"; }
run >"$out/$name.stock.log" 2>&1
rc_s=$?
MACUDA_DEVICE=kernel LD_LIBRARY_PATH="$lib" run >"$out/$name.ours.log" 2>&1
rc_o=$?
if [ "$rc_s" -ne 0 ] || [ "$rc_o" -ne 0 ]; then
  echo "$name: llama-eval-callback exit stock $rc_s, ours $rc_o"
  exit 2
fi
python3 - "$out/$name.stock.log" "$out/$name.ours.log" "$name" <<'PY'
import sys

def tensors(path):
    """The printed tensors in order: (header line, the lines under it)."""
    out, cur = [], None
    for line in open(path, errors="replace"):
        if line.startswith("common_debug_cb_eval:"):
            cur = [line.strip(), []]
            out.append(cur)
        elif cur is not None and line.startswith(" "):
            cur[1].append(line.rstrip())
    return out

stock, ours = tensors(sys.argv[1]), tensors(sys.argv[2])
name = sys.argv[3]
for i, (s, o) in enumerate(zip(stock, ours)):
    if s != o:
        def total(t):
            return next((l.strip() for l in t[1] if l.strip().startswith("sum =")), "no sum")
        print(f"{name}: tensor {i + 1} of {len(stock)} is the first to differ: {s[0]}")
        if o[0] != s[0]:
            print(f"    ours computed another tensor there: {o[0]}")
        print(f"    stock {total(s)}; ours {total(o)}")
        sys.exit(1)
if len(stock) != len(ours) or not stock:
    print(f"{name}: stock printed {len(stock)} tensors, ours {len(ours)}")
    sys.exit(1)
print(f"{name}: all {len(stock)} tensors print the same")
PY
