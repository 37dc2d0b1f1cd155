#!/usr/bin/env bash
# Waits up to SECONDS (default 540) for a gate started in the background
# (tests/llama/gate.sh) to finish, then prints its progress and summary
# and packs its results (the plain-text outputs) into DEST/gate.tgz when
# DEST is given. Exit 0: the gate finished; 2: still running; 3: no gate
# was started on this machine (the device machine was given back and this
# one is fresh), so a caller stops polling at once instead of waiting.
#
#   tests/llama/gate-wait.sh [SECONDS] [DEST]
set -u
limit=${1:-540}
dest=${2:-}
out=${GATE_OUT:-/tmp/macuda-gate}
progress=$out/progress.txt
if [ ! -e "$progress" ]; then
  echo "no gate was started on this machine ($progress is absent)"
  exit 3
fi
finished() { grep -q " done$" "$progress"; }
end=$((SECONDS + limit))
while [ "$SECONDS" -lt "$end" ] && ! finished; do sleep 5; done
cat "$progress"
echo "--- summary so far"
cat "$out/summary.txt"
if [ -n "$dest" ]; then
  # The raw per-op outputs stay (their .plain copies go); a pattern such
  # as ops-*.txt would also drop the variants' ops-*/ops.txt summaries.
  tar czf "$dest/gate.tgz" -C "$(dirname "$out")" --exclude='*.txt.gz' \
    --exclude='*.stock.txt' --exclude='*.ours.txt' --exclude='*.alone.txt' --exclude='stock-all.txt' "$(basename "$out")" 2>/dev/null
  cp "$progress" "$out/summary.txt" "$dest/" 2>/dev/null
fi
finished || exit 2
