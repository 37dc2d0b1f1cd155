#!/usr/bin/env bash
# test-backend-ops on ours alone, for a GPU session too short for stock's
# nvcc build beside it (about 5 minutes on 16 CPUs before the first op):
# each op runs in its own process (MACUDA_DEVICE=kernel) through the
# split-built, statically linked test-backend-ops, JOBS at a time, the
# ops named in OPS_FIRST ahead of the rest, each under OP_TIMEOUT seconds
# (default 300); no op starts after DEADLINE seconds (default: none), so
# a session with little device time left still returns what it ran.
#
# What it can say without stock: an op whose every case ran and passed on
# ours passes whatever stock passes. An op with a failed or unreached
# case says nothing on its own (stock may fail the same case: a near tie
# in a top-k selection); tests/llama/ops.sh, with stock beside it, is the
# judge of those.
#
#   tests/split/ops-ours.sh BIN_DIR OUT [OP...]    # default: every op --list-ops names
#
# Writes OUT/ops-OP.txt (the run, plain), OUT/ops-OP.rc, OUT/ops.txt (a
# line per op, then the totals). Exit 0 when every op ran and passed every
# case.
set -u
bin=$1/test-backend-ops
out=$2
shift 2
mkdir -p "$out"
limit=${OP_TIMEOUT:-300}
deadline=${DEADLINE:-0}
jobs=${JOBS:-8}
ops=("$@")
if [ ${#ops[@]} -eq 0 ]; then
  # --list-ops prints "Available GGML operations (N):" and then the names,
  # several to a line.
  mapfile -t ops < <("$bin" --list-ops 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' | grep -v ':' | tr -s ' \t' '\n' | grep -E '^[A-Z][A-Z0-9_]+$')
fi
[ ${#ops[@]} -gt 0 ] || { echo "no ops to run (is $bin there?)" >&2; exit 2; }
first=" ${OPS_FIRST:-} "
queue=()
for op in "${ops[@]}"; do [[ $first == *" $op "* ]] && queue+=("$op"); done
for op in "${ops[@]}"; do [[ $first == *" $op "* ]] || queue+=("$op"); done
one() { # OP
  MACUDA_DEVICE=kernel timeout --kill-after=5 "$limit" "$bin" test -o "$1" -b CUDA0 2>&1 |
    sed 's/\x1b\[[0-9;]*m//g' >"$out/ops-$1.txt"
  echo "${PIPESTATUS[0]}" >"$out/ops-$1.rc"
}
started=$SECONDS
running=0
for op in "${queue[@]}"; do
  if [ "$deadline" -gt 0 ] && [ $((SECONDS - started)) -ge "$deadline" ]; then break; fi
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  one "$op" &
  running=$((running + 1))
done
wait
summary=$out/ops.txt
: >"$summary"
clean=0
open=0
unrun=0
for op in "${queue[@]}"; do
  f=$out/ops-$op.txt
  if [ ! -e "$out/ops-$op.rc" ]; then
    echo "$op: not run (deadline)" >>"$summary"
    unrun=$((unrun + 1))
    continue
  fi
  rc=$(cat "$out/ops-$op.rc")
  ok=$(grep -cE "(^| )$op\(.*\): (.* )?OK$" "$f")
  bad=$(grep -cE "(^| )$op\(.*\): (.* )?FAIL$" "$f")
  # CUDA0 must have been tested: where the runtime cannot open the card,
  # test-backend-ops skips the backend and still exits 0.
  tested=no
  grep -qE "^ *Backend CUDA0: OK$" "$f" && tested=yes
  if [ "$rc" -eq 0 ] && [ "$bad" -eq 0 ] && [ "$tested" = yes ]; then
    clean=$((clean + 1))
    if [ "$ok" -gt 0 ]; then
      echo "$op: $ok cases, every one passed" >>"$summary"
    else
      echo "$op: no case of it runs on CUDA0" >>"$summary"
    fi
  elif [ "$tested" = no ] && [ "$bad" -eq 0 ]; then
    open=$((open + 1))
    echo "$op: CUDA0 was not tested (exit $rc; see ops-$op.txt)" >>"$summary"
  else
    open=$((open + 1))
    echo "$op: $ok passed, $bad failed, exit $rc: needs stock's verdict (tests/llama/ops.sh)" >>"$summary"
  fi
done
echo "ops: ${#queue[@]}; all passed: $clean; open: $open; not run: $unrun; $((SECONDS - started)) s" >>"$summary"
cat "$summary"
[ "$open" -eq 0 ] && [ "$unrun" -eq 0 ]
