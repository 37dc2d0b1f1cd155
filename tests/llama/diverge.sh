#!/usr/bin/env bash
# Where does our computation first leave stock's? Runs llama.cpp's
# llama-eval-callback (which prints every tensor the graph computes, a few
# of its values and its sum) on MODEL with PROMPT, on NVIDIA's stack and on
# ours, and names the first tensor whose printout differs: the op to look
# at when a greedy decode differs but the op suite passes (its tolerance
# hides what a byte-compare of the text does not).
#
#   tests/llama/diverge.sh BUILD LIBDIR OUTDIR MODEL [SRC]
#
# The printout shows four decimals of a few values per tensor, so its first
# difference can lie downstream of the first bit that differs. With SRC
# (llama.cpp's source, as built in BUILD) it first builds our
# tensor_hashes.cpp against that build and compares a hash of every
# tensor's bytes, which names the first op that differs in any bit.
#
# Writes OUTDIR/NAME.{stock,ours}.{log,hashes} and prints a line or two.
# Exit 0 when the two agree, 1 when they differ, 2 when a run failed.
set -u
build=$1
lib=$2
out=$3
model=$4
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
src=${5:-}
bin=$build/bin/llama-eval-callback
prompt=${PROMPT:-"The history of the graphics processor begins"}
name=$(basename "$model" .gguf)
run() { timeout --kill-after=5 300 "$bin" -m "$model" -p "$prompt" -n 1 -ngl 99 "$@"; }
hashes_differ=0
if [ -n "$src" ]; then
  tool=$out/tensor_hashes
  libs=$(cd "$build/bin" && pwd)
  [ -x "$tool" ] || g++ -O2 -std=c++17 -I "$src/include" -I "$src/ggml/include" "$here/tensor_hashes.cpp" \
      -L "$libs" -lllama -lggml -lggml-base -Wl,-rpath,"$libs" -o "$tool" >"$out/tensor_hashes.build.log" 2>&1
  if [ -x "$tool" ]; then
    timeout --kill-after=5 300 "$tool" "$model" "$prompt" >"$out/$name.stock.hashes" 2>"$out/$name.stock.hashes.err"
    rc_s=$?
    MACUDA_DEVICE=kernel LD_LIBRARY_PATH="$lib" timeout --kill-after=5 300 "$tool" "$model" "$prompt" \
      >"$out/$name.ours.hashes" 2>"$out/$name.ours.hashes.err"
    rc_o=$?
    if [ "$rc_s" -ne 0 ] || [ "$rc_o" -ne 0 ]; then
      echo "$name: tensor_hashes exit stock $rc_s, ours $rc_o"
    else
      first=$(paste -d'|' "$out/$name.stock.hashes" "$out/$name.ours.hashes" | awk -F'|' '$1 != $2 {print NR ": stock " $1 " / ours " $2; exit}')
      if [ -n "$first" ]; then
        echo "$name: first tensor differing in its bytes, line $first"
        hashes_differ=1
      else
        echo "$name: all $(wc -l <"$out/$name.stock.hashes") tensor hashes and the argmax agree"
      fi
    fi
  else
    echo "$name: tensor_hashes did not build: $(tail -1 "$out/tensor_hashes.build.log")"
  fi
fi
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
rc=$?
# The printouts may agree where the bytes do not.
if [ "$rc" -eq 0 ] && [ "$hashes_differ" -eq 1 ]; then rc=1; fi
exit "$rc"
