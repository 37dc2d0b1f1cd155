#!/usr/bin/env bash
# Runs llama.cpp's test-backend-ops (mode test, CUDA0) one op at a time, so
# one crash does not hide the rest, on NVIDIA's stack (stock) and on ours
# (MACUDA_DEVICE=kernel, our libcudart.so.13 and libcublas.so.13 first on
# LD_LIBRARY_PATH), and says per op how many cases each passed and which
# cases stock passes and we do not. With no OP named, stock runs the whole
# suite in one process (stock does not crash), and every test group it
# printed (ggml's ops and test-backend-ops' fusion groups, which
# --list-ops does not name) then runs on ours one at a time.
#
#   tests/llama/ops.sh BUILD LIBDIR OUTDIR [OP...]
#
# BOTH_ENV="K=V ..."  set for both sides (GGML_CUDA_DISABLE_GRAPHS=1)
# OURS_ENV="K=V ..."  set for ours only (MACUDA_CHAIN_DEPTH=32,
#                     MACUDA_SYNC_LAUNCHES=1)
# STOCK_FROM=DIR      take stock's results from an earlier run's OUTDIR
#                     instead of running stock again (for variants that
#                     change only ours)
# OP_TIMEOUT=S        per op and side (default 900: FLASH_ATTN_EXT, MUL_MAT
#                     and MUL_MAT_ID ran past 300 s on ours with 21 of
#                     these processes sharing 16 CPUs); the whole suite on
#                     stock gets SUITE_TIMEOUT (default 1800)
# RERUNS=K            at most K runs of each case ours failed, per side
#                     (default 200), RERUN_JOBS at a time on each side
#                     (default 8), at least RERUNS_MIN (default 16) before
#                     the case can be called borderline (flake.py)
# STOCK_JOBS=N        stock's whole suite runs with test-backend-ops' own
#                     -j N (N workers, each with its own CUDA backend;
#                     each result line is printed whole; default 1)
# OPS_JOBS=N          ours runs N ops at once, each in its own process
#                     (default 1), the ops with the most cases first (so
#                     the longest do not start last); the cases do not
#                     depend on timing, and the test's CPU reference, not
#                     the GPU, is most of its time
# OPS_FIRST="OP ..."  these ops of ours start ahead of the rest (what
#                     failed in an earlier run, when the device time may
#                     not last the whole suite)
#
# An op of ours that ended on our sync patience runs once more after the
# rest, alone in this part (ops-OP.ours.alone.txt), and its line says what
# that run passed too; the first run is the one that counts.
#
# test-backend-ops draws its inputs at random in every process, so a case
# whose error sits near its threshold fails now and then on either stack.
# Where ours lost at most 5 cases of an op and failed each (none unreached),
# each runs again alone (-p) on both sides, in rounds of RERUN_JOBS a side,
# until it is called borderline or RERUNS runs a side are done, and its
# line says how often each side failed it. Borderline (tests/llama/flake.py):
# stock failed it at least once, ours passed it at least once, and ours did
# not fail it significantly more often than stock; whether it passes then
# hangs on the inputs, on NVIDIA's stack as on ours (a near tie in a top-k
# selection fails a few runs in a hundred on either). Anything else is ours
# to fix, and a case ours never reached (a crash, the time limit) is never
# borderline.
#
# Writes OUTDIR/ops-OP.{stock,ours}.txt (and .plain, without colours) and
# OUTDIR/ops.txt: a line per op, then the totals. Exit 0 when every case
# stock passes passes on ours too.
set -u
build=$1
lib=$2
out=$3
shift 3
mkdir -p "$out"
bin=$build/bin/test-backend-ops
# OURS_BIN=DIR: ours runs DIR/test-backend-ops (the split build, linked statically
# against our libraries) instead of stock's binary over our shared ones.
ours_bin=${OURS_BIN:+$OURS_BIN/test-backend-ops}
ours_bin=${ours_bin:-$bin}
summary=$out/ops.txt
: >"$summary"
limit=${OP_TIMEOUT:-900}
read -r -a both <<<"${BOTH_ENV:-}"
read -r -a ours_env <<<"${OURS_ENV:-}"
plain() { sed 's/\x1b\[[0-9;]*m//g' "$1" >"${1%.txt}.plain"; }
ops=("$@")
whole=
if [ ${#ops[@]} -eq 0 ]; then
  whole=$out/stock-all.txt
  if [ -n "${STOCK_FROM:-}" ] && [ -e "$STOCK_FROM/stock-all.txt" ]; then
    cp "$STOCK_FROM/stock-all.txt" "$whole"
    cp "$STOCK_FROM/stock-all.rc" "$out/stock-all.rc" 2>/dev/null || true
  else
    env "${both[@]}" timeout --kill-after=5 "${SUITE_TIMEOUT:-1800}" "$bin" test -b CUDA0 \
      -j "${STOCK_JOBS:-1}" >"$whole" 2>&1
    echo "$?" >"$out/stock-all.rc"
  fi
  plain "$whole"
  mapfile -t ops < <(sed -n 's/^  \([A-Z0-9_]*\)(.*/\1/p' "${whole%.txt}.plain" | awk '!seen[$0]++')
fi
# A case's line: "[details]  OP(params): OK|FAIL".
count() { grep -cE "(^| )$op\(.*\): (.* )?OK$" "$1" || true; }
total() { grep -cE "(^| )$op\(.*\): (.* )?(OK|FAIL)$" "$1" || true; }
# Cases stock passes that ours did not pass (failed, or never reached).
lost() { comm -23 <(grep -E "(^| )$op\(.*\): (.* )?OK$" "$1" | sed -E "s/.*($op\(.*\)): .*/\1/" | sort) \
                  <(grep -E "(^| )$op\(.*\): (.* )?OK$" "$2" | sed -E "s/.*($op\(.*\)): .*/\1/" | sort); }
# Stock's side first (from its whole run, an earlier run, or per op).
for op in "${ops[@]}"; do
  s=$out/ops-$op.stock.txt
  if [ -n "$whole" ]; then
    grep -aE "(^| )$op\(" "${whole%.txt}.plain" >"$s" || true
    rc_s=$(cat "$out/stock-all.rc" 2>/dev/null || echo "?")
  elif [ -n "${STOCK_FROM:-}" ] && [ -e "$STOCK_FROM/ops-$op.stock.txt" ]; then
    cp "$STOCK_FROM/ops-$op.stock.txt" "$s"
    rc_s=$(cat "$STOCK_FROM/ops-$op.stock.rc" 2>/dev/null || echo "?")
  else
    env "${both[@]}" timeout --kill-after=5 "$limit" "$bin" test -o "$op" -b CUDA0 >"$s" 2>&1
    rc_s=$?
  fi
  echo "$rc_s" >"${s%.txt}.rc"
  plain "$s"
done
# Ours, OPS_JOBS at a time, the ops with most cases on stock first; each
# op's seconds go beside its exit status.
ours_one() { # OP [SUFFIX]
  local o=$out/ops-$1.ours${2:-}.txt
  local t0=$SECONDS
  env "${both[@]}" "${ours_env[@]}" MACUDA_DEVICE=kernel LD_LIBRARY_PATH="$lib" \
    timeout --kill-after=5 "$limit" "$ours_bin" test -o "$1" -b CUDA0 >"$o" 2>&1
  echo "$?" >"${o%.txt}.rc"
  echo $((SECONDS - t0)) >"${o%.txt}.secs"
  plain "$o"
}
first=" ${OPS_FIRST:-} "
mapfile -t queue < <(for op in "${ops[@]}"; do [[ $first != *" $op "* ]] || echo "$op"; done
  for op in "${ops[@]}"; do [[ $first == *" $op "* ]] || echo "$(total "$out/ops-$op.stock.plain") $op"; done |
    sort -s -k1,1nr | cut -d' ' -f2)
jobs=${OPS_JOBS:-1}
running=0
for op in "${queue[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  ours_one "$op" &
  running=$((running + 1))
done
wait
# An op of ours that ended on our sync patience (a queue that stood still;
# seen only with the GPU shared) runs once more after the others, alone in
# this part: its line says both, and the first run is the one that counts.
timed_out() { grep -q "the work did not complete in time" "$out/ops-$1.ours.plain"; }
for op in "${ops[@]}"; do
  if timed_out "$op"; then ours_one "$op" .alone; fi
done
# Cases ours failed (a FAIL line, not a case it never reached).
failed() { lost "$1" "$2" | while read -r c; do
  grep -F "$c: " "$2" | grep -qE ": (.* )?FAIL$" && echo "$c"
done; }
# One case alone on one side: prints ok or fail.
case_once() { # SIDE OP PARAMS-REGEX
  local env_side=() side_bin=$bin
  [ "$1" = ours ] && env_side=("${ours_env[@]}" MACUDA_DEVICE=kernel LD_LIBRARY_PATH="$lib") && side_bin=$ours_bin
  if env "${both[@]}" "${env_side[@]}" timeout --kill-after=5 "$limit" "$side_bin" test -o "$2" -p "$3" -b CUDA0 2>&1 |
    sed 's/\x1b\[[0-9;]*m//g' | grep -qE "(^| )$2\(.*\): (.* )?OK$"; then echo ok; else echo fail; fi
}
reruns=${RERUNS:-200}
rerun_jobs=${RERUN_JOBS:-8}
reruns_min=${RERUNS_MIN:-16}
here=$(cd "$(dirname "$0")" && pwd)
# The verdict on a case's rerun counts: "borderline P" or "ours P".
verdict() { python3 "$here/flake.py" "$1" "$2" "$3"; }
rerun_failed() { # OP: writes OUTDIR/ops-OP.reruns.txt, a line per case: CASE stock-fails ours-fails RUNS VERDICT P
  local op=$1 c params re k b i n_s n_o v scratch
  : >"$out/ops-$op.reruns.txt"
  failed "$out/ops-$op.stock.plain" "$out/ops-$op.ours.plain" | while read -r c; do
    params=${c#"$op("}
    params=${params%)}
    re="^$(printf '%s' "$params" | sed -e 's/[][(){}.*+?^$|\\]/\\&/g')\$"
    n_s=0
    n_o=0
    k=0
    v="ours 1"
    scratch=$(mktemp -d)
    while [ "$k" -lt "$reruns" ]; do
      b=$((reruns - k < rerun_jobs ? reruns - k : rerun_jobs))
      for ((i = 0; i < b; i++)); do
        case_once stock "$op" "$re" >"$scratch/stock.$i" &
        case_once ours "$op" "$re" >"$scratch/ours.$i" &
      done
      wait
      n_s=$((n_s + $(cat "$scratch"/stock.* | grep -c fail)))
      n_o=$((n_o + $(cat "$scratch"/ours.* | grep -c fail)))
      rm -f "$scratch"/*
      k=$((k + b))
      v=$(verdict "$n_s" "$n_o" "$k")
      [ "$k" -ge "$reruns_min" ] && [ "${v%% *}" = borderline ] && break
    done
    rm -rf "$scratch"
    echo "$c $n_s $n_o $k $v" >>"$out/ops-$op.reruns.txt"
  done
}
# The summary, in the suite's order.
clean=0
borderline=0
dirty=0
for op in "${ops[@]}"; do
  sp=$out/ops-$op.stock.plain
  Op=$out/ops-$op.ours.plain
  rc_s=$(cat "$out/ops-$op.stock.rc")
  rc_o=$(cat "$out/ops-$op.ours.rc")
  n_lost=$(lost "$sp" "$Op" | wc -l)
  verdict=
  if [ "$n_lost" -eq 0 ]; then
    clean=$((clean + 1))
  else
    # Borderline only when every lost case was a FAIL, five at most (more
    # is no run of bad luck, and is not rerun), and flake.py calls each of
    # them borderline from its reruns alone.
    n_border=0
    if [ "$n_lost" -le 5 ] && [ "$(failed "$sp" "$Op" | wc -l)" -eq "$n_lost" ]; then
      rerun_failed "$op"
      n_border=$(awk '$(NF-1) == "borderline"' "$out/ops-$op.reruns.txt" | wc -l)
    fi
    if [ "$n_border" -eq "$n_lost" ]; then
      borderline=$((borderline + 1))
      verdict="; borderline: stock failed them too alone, and ours not more often"
    else
      dirty=$((dirty + 1))
    fi
  fi
  alone=$out/ops-$op.ours.alone.plain
  again=
  if [ -e "$alone" ]; then
    again="; alone after the rest: ours $(count "$alone")/$(total "$alone") (exit $(cat "$out/ops-$op.ours.alone.rc")), not passed $(lost "$sp" "$alone" | wc -l)"
  fi
  echo "$op: stock $(count "$sp")/$(total "$sp") (exit $rc_s), ours $(count "$Op")/$(total "$Op") (exit $rc_o, $(cat "$out/ops-$op.ours.secs") s); stock-passed cases ours did not pass: $n_lost$verdict$again" \
    | tee -a "$summary"
  lost "$sp" "$Op" | head -5 | while read -r c; do
    r=$(grep -F "$c " "$out/ops-$op.reruns.txt" 2>/dev/null | awk '{print "  (alone, failed by stock " $(NF-4) "/" $(NF-2) ", by ours " $(NF-3) "/" $(NF-2) "; " $(NF-1) ", p " $NF ")"}')
    echo "    $c$r"
  done | tee -a "$summary"
  # Why ours ended: the CUDA error and the call it came from.
  if [ "$rc_o" -ge 124 ]; then
    grep -m1 -A1 "CUDA error:" "$Op" | sed 's/^/    ours ended: /' | tee -a "$summary"
  fi
done
# Our stack's own word on a queue that stood still: a doorbell rung again
# (and whether that got it going), or a queue called stuck with where
# both queues and their channels stood.
rerung=$(grep -l "its doorbell was rung again" "$out"/ops-*.ours.plain 2>/dev/null | wc -l)
stood=$(grep -l "a queue stood still" "$out"/ops-*.ours.plain 2>/dev/null | wc -l)
grep -h "a queue stood still" "$out"/ops-*.ours.plain 2>/dev/null | sed 's/.*error=//' | head -3 | sed 's/^/    stuck: /' | tee -a "$summary"
echo "ops: ${#ops[@]}; ours passes every case stock passes in $clean, borderline in $borderline, not in $dirty; doorbells rung again in $rerung, a queue stuck in $stood (BOTH_ENV='${BOTH_ENV:-}' OURS_ENV='${OURS_ENV:-}')" \
  | tee -a "$summary"
[ "$dirty" -eq 0 ]
