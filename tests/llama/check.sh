#!/usr/bin/env bash
# What CI can check of the llama.cpp gate without a GPU: the scripts parse,
# anatomy.py and ops.sh read made-up inputs as made, and the model
# generator writes the same bytes twice for a seed, other bytes for
# another seed, and files gguf-py reads back with the tensors,
# types and shapes llama.cpp's llama architecture expects (the toy shapes;
# the real ones differ only in their sizes).
#
#   tests/llama/check.sh       (needs python3 with venv and pip, and the network)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for s in "$here"/*.sh "$here"/../device/*.sh; do bash -n "$s"; done
python3 -c "import ast, sys; [ast.parse(open(f).read(), f) for f in sys.argv[1:]]" "$here"/*.py
# anatomy.py on a made-up trace of three tokens: two chains a token, the
# second handed over while the first runs (a seam in time), the next
# token's first after the GPU went idle (a late one), and what it must
# read from it.
python3 - "$scratch/trace.json" <<'PY'
import json, sys
ev, serial, t = [], 0, 1000.0
for token in range(3):
    ev.append({"ph": "X", "pid": 2, "tid": 201, "name": "cudaGraphLaunch", "ts": t, "dur": 50})
    start = t + 60
    first = start
    for chain, n in ((2 * token, 8), (2 * token + 1, 16)):
        for i in range(n):
            serial += 1
            pushed = start - 20 if chain % 2 == 0 else first
            ev.append({"ph": "i", "pid": 2, "tid": 102, "name": "push k", "s": "t",
                       "ts": pushed + i * 0.1})
            ev.append({"ph": "X", "pid": 1, "tid": 1, "name": "k", "ts": start, "dur": 2.0,
                       "args": {"chain": chain, "serial": serial}})
            start += 2.0
        start += 25.0
    t = start + 500
json.dump({"traceEvents": ev}, open(sys.argv[1], "w"))
PY
anatomy=$(python3 "$here/anatomy.py" "$scratch/trace.json")
grep -q "median token: 24 kernels in 2 chains, GPU busy 48 us" <<<"$anatomy" || { echo "anatomy.py read: $anatomy"; exit 1; }
grep -q "handed over in time: 3, gap median 25.0 us" <<<"$anatomy" || { echo "anatomy.py read: $anatomy"; exit 1; }
grep -q "waited for the hand-over: 2," <<<"$anatomy" || { echo "anatomy.py read: $anatomy"; exit 1; }
echo "anatomy.py: a made-up trace of 3 tokens read as made"
# anatomy.py --against: a made-up stock trace (CUPTI's layout: no chains,
# no pushes) beside one of ours, 5 tokens of 4 kernels of one family and 2
# of another; the steps and totals per family must read as made.
python3 - "$scratch" <<'PY'
import json, sys
def trace(path, durs, gap, ours):
    ev, serial, t = [], 0, 1000.0
    for token in range(5):
        ev.append({"ph": "X", "pid": 2, "tid": 201, "name": "cudaGraphLaunch", "ts": t, "dur": 5})
        ev.append({"ph": "X", "pid": 2, "tid": 201, "name": "cudaStreamSynchronize", "ts": t + 300,
                   "dur": 40 if ours else 20})
        start = t + 20
        for name, d in [("_Z4rmsnPf", durs[0])] * 4 + [("_Z3mmvPf", durs[1])] * 2:
            serial += 1
            args = {"mangled": name, "serial": serial}
            if ours:
                args["chain"] = token
            ev.append({"ph": "X", "pid": 1, "tid": 1, "name": name, "ts": start, "dur": d, "args": args})
            start += d + gap
        t += 400
    json.dump({"traceEvents": ev}, open(path, "w"))
trace(sys.argv[1] + "/stock.json", (2.0, 3.0), 0.5, False)
trace(sys.argv[1] + "/ours.json", (3.0, 3.0), 1.0, True)
PY
side=$(python3 "$here/anatomy.py" "$scratch/ours.json" --against "$scratch/stock.json")
for want in "(rmsn|_Z4rmsnPf) +4 / +4 +2.50 / +4.00 +9.5 / +15.0" "(mmv|_Z3mmvPf) +2 / +2 +3.50 / +4.00 +7.0 / +8.0" \
  "all kernels +16.5 / +23.0" "cudaStreamSynchronize +20.0 / +40.0" "stock: the median token: 6 kernels"; do
  grep -Eq "$want" <<<"$side" || { echo "anatomy.py --against read: $side (wanted $want)"; exit 1; }
done
echo "anatomy.py --against: a made-up stock trace beside one of ours read as made"
# ops.sh against a made-up test-backend-ops with ops OPA and OPD (3 cases
# each), OPC (2) and OPE (1): ours fails OPA's second case, OPC's first and
# OPE's in the suite run and never reaches OPD's last two; alone, OPA's
# fails on either side every other run (a borderline case), OPC's only on
# ours (a failure of ours), and OPE's on stock once in twelve but on ours
# eleven times in twelve (both fail it, ours far more often: a failure of
# ours); OPD's, never reached, are not rerun. The parameters carry the
# brackets and dots real ones do, which the -p regex must escape. Reruns go
# one at a time here, so each case's runs come in order.
mkdir -p "$scratch/fake/bin"
cat >"$scratch/fake/bin/test-backend-ops" <<'FAKE'
#!/usr/bin/env bash
op= re=
while [ $# -gt 0 ]; do case $1 in -o) op=$2; shift ;; -p) re=$2; shift ;; esac; shift; done
side=stock
[ -n "${MACUDA_DEVICE:-}" ] && side=ours
for o in OPA OPC OPD OPE; do
  { [ -z "$op" ] || [ "$op" = "$o" ]; } || continue
  n=3
  [ $o = OPC ] && n=2
  [ $o = OPE ] && n=1
  for x in $(seq 1 "$n"); do
    v="ne=[$x,1],s=2.000000"
    [ -z "$re" ] || [[ $v =~ $re ]] || continue
    # Ours stops before OPD's second case (a crash), and it is not rerun.
    [ "$o$x$side" = OPD2ours ] && exit 134
    fail=0
    if [ -z "$re" ]; then
      [ $side = ours ] && { [ "$o$x" = OPA2 ] || [ "$o$x" = OPC1 ] || [ "$o$x" = OPE1 ]; } && fail=1
    else
      runs=$FAKE_RUNS.$side.$o$x
      k=$(cat "$runs" 2>/dev/null || echo 0)
      echo $((k + 1)) >"$runs"
      [ "$o$x" = OPA2 ] && [ $((k % 2)) -eq 0 ] && fail=1
      [ "$o$x" = OPC1 ] && [ $side = ours ] && fail=1
      [ "$o$x$side" = OPE1stock ] && [ "$k" -eq 5 ] && fail=1
      [ "$o$x$side" = OPE1ours ] && [ "$k" -ne 7 ] && fail=1
    fi
    if [ $fail = 1 ]; then echo "[$o] ERR = 0.5 > 0.1   $o($v): FAIL"; else echo "  $o($v): OK"; fi
  done
done
FAKE
chmod +x "$scratch/fake/bin/test-backend-ops"
ops_rc=0
FAKE_RUNS=$scratch/fake/runs RERUNS=12 RERUNS_MIN=2 RERUN_JOBS=1 OPS_JOBS=2 bash "$here/ops.sh" "$scratch/fake" \
  "$scratch/fake/lib" "$scratch/fake/out" >"$scratch/fake/summary.txt" 2>&1 || ops_rc=$?
ops_summary=$(cat "$scratch/fake/summary.txt")
for want in "OPA: stock 3/3 (exit 0), ours 2/3" "not pass: 1; borderline" \
            "OPA(ne=[2,1],s=2.000000)  (alone, failed by stock 1/2, by ours 1/2; borderline, p 0.833)" \
            "OPC(ne=[1,1],s=2.000000)  (alone, failed by stock 0/12, by ours 12/12; ours, p 3.7e-07)" \
            "OPE(ne=[1,1],s=2.000000)  (alone, failed by stock 1/12, by ours 11/12; ours, p 5.36e-05)" \
            "OPD: stock 3/3 (exit 0), ours 1/1 (exit 134" \
            "in 0, borderline in 1, not in 3;"; do
  grep -qF "$want" <<<"$ops_summary" || { echo "ops.sh on a made-up suite: no '$want' in:"; echo "$ops_summary"; exit 1; }
done
[ ! -s "$scratch/fake/out/ops-OPD.reruns.txt" ] || { echo "ops.sh reran a case ours never reached"; exit 1; }
[ "$ops_rc" -eq 1 ] || { echo "ops.sh on a made-up suite with a failure of ours exited $ops_rc"; exit 1; }
echo "ops.sh: a made-up suite read as made (a borderline case, two failures of ours, cases never reached)"
# flake.py's verdicts on counts where the answer is plain.
for c in "0 0 10:ours" "1 0 10:borderline" "3 2 100:borderline" "2 40 100:ours" "1 10 10:ours" "0 5 200:ours"; do
  got=$(python3 "$here/flake.py" ${c%%:*})
  [ "${got%% *}" = "${c##*:}" ] || { echo "flake.py ${c%%:*}: '$got', wanted ${c##*:}"; exit 1; }
done
if python3 "$here/flake.py" 5 1 3 2>/dev/null; then echo "flake.py took counts above the runs"; exit 1; fi
echo "flake.py: plain counts judged as they must be"
"$here/source.sh" "$scratch/llama" >/dev/null
python3 -m venv "$scratch/venv"
"$scratch/venv/bin/pip" install -q numpy
py=$scratch/venv/bin/python
gen() { "$py" "$here/random_gguf.py" "$@" --vocab "$scratch/llama/models/ggml-vocab-llama-spm.gguf" \
          --gguf-py "$scratch/llama/gguf-py" >/dev/null; }
gen "$scratch/a.gguf" --shape tiny --type q4_0 --seed 7
gen "$scratch/b.gguf" --shape tiny --type q4_0 --seed 7
gen "$scratch/c.gguf" --shape tiny --type q4_0 --seed 8
gen "$scratch/moe.gguf" --shape tiny-moe --type f16 --seed 7
cmp -s "$scratch/a.gguf" "$scratch/b.gguf" || { echo "random_gguf.py: one seed, two different files"; exit 1; }
if cmp -s "$scratch/a.gguf" "$scratch/c.gguf"; then echo "random_gguf.py: two seeds, one file"; exit 1; fi
"$py" - "$scratch/llama/gguf-py" "$scratch/a.gguf" "$scratch/moe.gguf" <<'EOF'
import sys, types
sys.path.insert(0, sys.argv[1])
try:
    import yaml  # noqa: F401
except ImportError:
    sys.modules["yaml"] = types.ModuleType("yaml")
from gguf import GGUFReader, GGMLQuantizationType as Q

def check(path, weight_type, experts):
    r = GGUFReader(path)
    f = {k: v.contents() for k, v in r.fields.items() if not k.startswith("GGUF.")}
    assert f["general.architecture"] == "llama", f["general.architecture"]
    width, layers, ff = f["llama.embedding_length"], f["llama.block_count"], f["llama.feed_forward_length"]
    heads, kv = f["llama.attention.head_count"], f["llama.attention.head_count_kv"]
    vocab = len(f["tokenizer.ggml.tokens"])
    assert vocab == f["llama.vocab_size"] == 32000 and f["tokenizer.ggml.model"] == "llama"
    t = {x.name: x for x in r.tensors}
    kv_width = width // heads * kv
    want = {"token_embd.weight": [width, vocab], "output.weight": [width, vocab], "output_norm.weight": [width]}
    for i in range(layers):
        b = f"blk.{i}."
        want |= {b + "attn_q.weight": [width, width], b + "attn_k.weight": [width, kv_width],
                 b + "attn_v.weight": [width, kv_width], b + "attn_output.weight": [width, width],
                 b + "attn_norm.weight": [width], b + "ffn_norm.weight": [width]}
        if experts:
            n = f["llama.expert_count"]
            assert f["llama.expert_used_count"] <= n
            want |= {b + "ffn_gate_inp.weight": [width, n], b + "ffn_gate_exps.weight": [width, ff, n],
                     b + "ffn_up_exps.weight": [width, ff, n], b + "ffn_down_exps.weight": [ff, width, n]}
        else:
            want |= {b + "ffn_gate.weight": [width, ff], b + "ffn_up.weight": [width, ff], b + "ffn_down.weight": [ff, width]}
    assert set(t) == set(want), sorted(set(t) ^ set(want))
    for name, shape in want.items():
        assert list(map(int, t[name].shape)) == shape, (name, t[name].shape, shape)
        norm = name.endswith("norm.weight") or name.endswith("gate_inp.weight")
        assert t[name].tensor_type == (Q.F32 if norm else weight_type), (name, t[name].tensor_type)
    return len(t)

n1 = check(sys.argv[2], Q.Q4_0, False)
n2 = check(sys.argv[3], Q.F16, True)
print(f"random models: tiny Q4_0 ({n1} tensors) and tiny-moe F16 ({n2}) as llama.cpp's llama architecture expects; one seed, one file")
EOF
