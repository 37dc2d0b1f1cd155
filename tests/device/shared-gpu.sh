#!/usr/bin/env bash
# Many processes on one GPU at once, ours beside NVIDIA's stack: each runs
# tests/device/shared_gpu_stress.cu (copy in, kernels, copy out, sync,
# checked) for SECONDS. On the H200 about 8% of our test-backend-ops
# processes stood still in a sync when 15 of ours and 8 of stock's shared
# the card; this reproduces that in a minute, without llama.cpp.
#
#   tests/device/shared-gpu.sh OUTDIR
#
# OURS (default 16) and STOCK (default 8) processes; SECONDS_EACH (default
# 60); STRESS_ARGS="KERNELS ITERS BLOCKS" shapes each round's kernels (long
# kernels, say "8 20000 132", get preempted mid-grid on a shared GPU;
# default 8 kernels of one step on one block);
# VARIANTS: one round per entry, each "NAME:K=V,K=V" (or "NAME:" for none),
# set for ours in that round (default "default:"); LIBS=DIR in an entry
# takes our libraries from DIR in that round (to compare two builds side by
# side), else from target/device/cublas/lib. Writes OUTDIR/summary.txt (per round: how many
# of ours and of stock finished right, failed, or were still running at the
# limit, and the longest sync) and OUTDIR/reports-NAME/ (our crash reports).
set -u
cd "$(dirname "$0")/../.."
out=$1
mkdir -p "$out"
lib=${MACUDA_LIBS:-target/device/cublas/lib}
nvcc=${NVCC:-$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)}
bin=/tmp/macuda-shared-gpu-stress
"$nvcc" -O2 -arch=sm_90 -cudart shared -o "$bin" tests/device/shared_gpu_stress.cu || { echo "nvcc failed"; exit 1; }
ours=${OURS:-16}
stock=${STOCK:-8}
secs=${SECONDS_EACH:-60}
stress_args=${STRESS_ARGS:-}
limit=$((secs + 60))
summary=$out/summary.txt
: >"$summary"
bad=0
for variant in ${VARIANTS:-default:}; do
  name=${variant%%:*}
  IFS=, read -r -a given <<<"${variant#*:}"
  extra=()
  round_lib=$lib
  for kv in "${given[@]}"; do
    case $kv in
      LIBS=*) round_lib=${kv#LIBS=} ;;
      *) extra+=("$kv") ;;
    esac
  done
  d=$out/$name
  mkdir -p "$d" "$out/reports-$name"
  pids=()
  for i in $(seq 1 "$ours"); do
    env "${extra[@]}" MACUDA_DEVICE=kernel MACUDA_REPORT_DIR="$out/reports-$name" LD_LIBRARY_PATH="$round_lib" \
      timeout --kill-after=5 "$limit" "$bin" "$secs" $stress_args >"$d/ours.$i.txt" 2>"$d/ours.$i.err" &
    pids+=("$!:ours.$i")
  done
  for i in $(seq 1 "$stock"); do
    timeout --kill-after=5 "$limit" "$bin" "$secs" $stress_args >"$d/stock.$i.txt" 2>"$d/stock.$i.err" &
    pids+=("$!:stock.$i")
  done
  for p in "${pids[@]}"; do
    wait "${p%%:*}"
    echo "$?" >"$d/${p#*:}.rc"
  done
  for side in ours stock; do
    ok=0 failed=0 hung=0 worst=0 rounds=0
    for f in "$d"/$side.*.txt; do
      rc=$(cat "${f%.txt}.rc")
      if [ "$rc" -ge 124 ]; then hung=$((hung + 1));
      elif [ "$rc" -eq 0 ] && grep -q "^stress: ok" "$f"; then ok=$((ok + 1));
      else failed=$((failed + 1)); fi
      w=$(sed -n 's/.*longest sync \([0-9.]*\) ms.*/\1/p' "$f")
      r=$(sed -n 's/^stress: [A-Z]* *\([0-9]*\) rounds.*/\1/p;s/^stress: ok \([0-9]*\) rounds.*/\1/p' "$f" | head -1)
      [ -n "$w" ] && worst=$(awk -v a="$worst" -v b="$w" 'BEGIN{print (b>a)?b:a}')
      [ -n "$r" ] && rounds=$((rounds + r))
    done
    n=$ours
    [ "$side" = stock ] && n=$stock
    [ "$n" -eq 0 ] && continue
    line="$name $side: $n processes, $ok right, $failed failed, $hung still running at ${limit} s; $rounds rounds in all, longest sync ${worst} ms"
    echo "$line" | tee -a "$summary"
    [ "$ok" -eq "$n" ] || bad=$((bad + 1))
    # What a failed one of ours said.
    [ "$side" = ours ] && grep -h "FAILED" "$d"/ours.*.txt | sort | uniq -c | head -5 | sed 's/^/    /' | tee -a "$summary"
  done
  echo "$name: $(ls "$out/reports-$name"/*-failure.msgpack 2>/dev/null | wc -l) crash reports of ours" | tee -a "$summary"
done
[ "$bad" -eq 0 ]
