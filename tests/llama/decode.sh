#!/usr/bin/env bash
# Greedy decode with llama-simple on NVIDIA's stack (stock) and on ours,
# three runs each, with CUDA graphs on and once more each with them off,
# and a byte-compare of the text: every run must print exactly what
# stock's first run printed (only a byte-compare catches some faults: a
# dropped cache invalidate once passed the whole op suite and changed the
# text).
#
#   tests/llama/decode.sh BUILD LIBDIR OUTDIR MODEL... 
#
# TOKENS (default 64) tokens after the prompt PROMPT; OURS_ENV as for
# ops.sh. Writes OUTDIR/decode-NAME.SIDE.RUN.{txt,err} and appends a line
# per model to OUTDIR/decode.txt. One more run of ours per model has the
# GPU timeline on (MACUDA_PROFILE=OUTDIR/profile-NAME.json): its text must
# be stock's too, and the summary line says how many reports it read and
# how many were missing (PROFILE=0 leaves it out). With STOCK_TRACE_LIB
# (tests/device/cupti-trace.sh's library), one more run of stock has
# CUPTI's timeline on (OUTDIR/stock-trace-NAME.json, its text compared
# too), and anatomy.py sets its median token beside ours, kernel family by
# family. Exit 0 when every text is identical and no report went missing.
set -u
build=$1
lib=$2
out=$3
shift 3
mkdir -p "$out"
bin=$build/bin/llama-simple
# OURS_BIN=DIR: ours runs DIR/llama-simple (the split build, linked statically
# against our libraries) instead of stock's binary over our shared ones.
ours_bin=${OURS_BIN:+$OURS_BIN/llama-simple}
ours_bin=${ours_bin:-$bin}
tokens=${TOKENS:-64}
prompt=${PROMPT:-"The history of the graphics processor begins"}
read -r -a ours_env <<<"${OURS_ENV:-}"
summary=$out/decode.txt
bad=0
for model in "$@"; do
  name=$(basename "$model" .gguf)
  runs=()
  for graphs in on off; do
    extra=()
    [ "$graphs" = off ] && extra=(GGML_CUDA_DISABLE_GRAPHS=1)
    repeat=3
    [ "$graphs" = off ] && repeat=1
    for side in stock ours; do
      for r in $(seq 1 "$repeat"); do
        f=$out/decode-$name.$side-graphs-$graphs.$r
        if [ "$side" = ours ]; then
          env "${extra[@]}" "${ours_env[@]}" MACUDA_DEVICE=kernel LD_LIBRARY_PATH="$lib" \
            timeout --kill-after=5 300 "$ours_bin" -m "$model" -n "$tokens" -ngl 99 "$prompt" >"$f.txt" 2>"$f.err"
        else
          env "${extra[@]}" timeout --kill-after=5 300 "$bin" -m "$model" -n "$tokens" -ngl 99 "$prompt" \
            >"$f.txt" 2>"$f.err"
        fi
        echo "$?" >"$f.rc"
        runs+=("$f")
      done
    done
  done
  profile_note=
  if [ "${PROFILE:-1}" != 0 ]; then
    f=$out/decode-$name.ours-profiled.1
    trace=$out/profile-$name.json
    env "${ours_env[@]}" MACUDA_PROFILE="$trace" MACUDA_DEVICE=kernel LD_LIBRARY_PATH="$lib" \
      timeout --kill-after=5 300 "$ours_bin" -m "$model" -n "$tokens" -ngl 99 "$prompt" >"$f.txt" 2>"$f.err"
    echo "$?" >"$f.rc"
    runs+=("$f")
    written=$(grep -m1 "GPU timeline of" "$f.err")
    missing=$(sed -n 's/.*(\([0-9]*\) reports missing).*/\1/p' <<<"$written")
    profile_note="; profiled: ${written:-no timeline written}"
    if [ "${missing:-x}" != 0 ]; then
      bad=$((bad + 1))
    fi
    [ -s "$trace.txt" ] && head -3 "$trace.txt" | sed 's/^/    /' >"$f.summary"
    # Token by token: the period, the GPU's busy part, the idle between
    # tokens, and the seams between chains (anatomy.py).
    [ -s "$trace" ] && python3 "$(dirname "$0")/anatomy.py" "$trace" 2>&1 | sed 's/^/    /' >>"$f.summary"
    if [ -n "${STOCK_TRACE_LIB:-}" ]; then
      f=$out/decode-$name.stock-traced.1
      stock_trace=$out/stock-trace-$name.json
      CUDA_INJECTION64_PATH=$STOCK_TRACE_LIB MACUDA_CUPTI_TRACE=$stock_trace \
        timeout --kill-after=5 300 "$bin" -m "$model" -n "$tokens" -ngl 99 "$prompt" >"$f.txt" 2>"$f.err"
      echo "$?" >"$f.rc"
      runs+=("$f")
      if [ -s "$stock_trace" ] && [ -s "$trace" ]; then
        echo "    stock (CUPTI) beside ours (profiled), the median token:" >>"$out/decode-$name.ours-profiled.1.summary"
        python3 "$(dirname "$0")/anatomy.py" "$trace" --against "$stock_trace" 2>&1 | sed 's/^/      /' \
          >>"$out/decode-$name.ours-profiled.1.summary"
      fi
      [ -s "$stock_trace" ] && gzip -f "$stock_trace"
    fi
    # Compressed, so the gate's archive carries every model's trace.
    [ -s "$trace" ] && gzip -f "$trace"
  fi
  ref=${runs[0]}
  same=0
  differ=()
  # Stock's first run is the reference; it must have decoded something
  # (an empty text would compare equal to another empty one).
  decoded=$(sed -n 's/.*decoded \([0-9]*\) tokens.*/\1/p' "$ref.err" | head -1)
  if [ ! -s "$ref.txt" ] || [ -z "$decoded" ] || [ "$decoded" -eq 0 ]; then
    bad=$((bad + 1))
    echo "$name: stock decoded nothing (exit $(cat "$ref.rc")): no reference to compare with" | tee -a "$summary"
    continue
  fi
  for f in "${runs[@]}"; do
    if [ "$(cat "$f.rc")" = 0 ] && cmp -s "$ref.txt" "$f.txt"; then
      same=$((same + 1))
    else
      differ+=("$(basename "$f") (exit $(cat "$f.rc"))")
    fi
  done
  speed_s=$(sed -n 's/.*speed: \([0-9.]*\) t\/s.*/\1/p' "$out/decode-$name.stock-graphs-on.1.err" | head -1)
  speed_o=$(sed -n 's/.*speed: \([0-9.]*\) t\/s.*/\1/p' "$out/decode-$name.ours-graphs-on.1.err" | head -1)
  # llama-simple's speed counts the prompt's decode too; llama_perf's
  # eval line is the generated tokens alone.
  eval_rate() { grep -v "prompt eval" "$1" | sed -n 's/.*eval time = .*, *\([0-9.]*\) tokens per second.*/\1/p' | head -1; }
  eval_s=$(eval_rate "$out/decode-$name.stock-graphs-on.1.err")
  eval_o=$(eval_rate "$out/decode-$name.ours-graphs-on.1.err")
  echo "$name: ${decoded:-?} tokens; $same of ${#runs[@]} runs print stock's text byte for byte (llama-simple t/s: stock ${speed_s:-?}, ours ${speed_o:-?}; generated tokens alone: stock ${eval_s:-?}, ours ${eval_o:-?})$profile_note" \
    | tee -a "$summary"
  [ -s "$out/decode-$name.ours-profiled.1.summary" ] && tee -a "$summary" <"$out/decode-$name.ours-profiled.1.summary"
  if [ ${#differ[@]} -gt 0 ]; then
    bad=$((bad + 1))
    printf '    differs: %s\n' "${differ[@]}" | tee -a "$summary"
    first=$(cut -d' ' -f1 <<<"${differ[0]}")
    cmp "$ref.txt" "$out/$first.txt" 2>&1 | head -1 | sed 's/^/    /' | tee -a "$summary"
  fi
done
[ "$bad" -eq 0 ]
