#!/usr/bin/env bash
# tinygrad's own TinyGPU client and driver against `macuda sim serve`:
# tinygrad (pinned in tinygrad.version beside this script) from PyPI into
# a virtual environment in the temp directory, never vendored; the sim on a
# free TCP port of 127.0.0.1. probe.py reads the card through tinygrad's
# client; with FIRMWARE_DIR (tests/sim/firmware.sh), boot.py then runs
# tinygrad's driver on a fresh card, twice (the second finds the firmware
# resident and resets the card first), then once more on a card whose
# GSP-RM sends a CPU-sequencer script before GSP_INIT_DONE (tinygrad's
# own executor must run it), and requires each to get at least as
# far as EXPECT (default init; boot.py says what each stage means).
# Last, xcheck.sh compares what tinygrad's boot and our own staged boot
# handed two fresh cards, field by field. Exit 0: all passed; 1: a
# check failed; 3: skipped (tinygrad could not be installed), with the
# reason. Without FIRMWARE_DIR the boot is skipped and says so.
#
#   tests/sim/tinygrad/check.sh MACUDA_BINARY [FIRMWARE_DIR [EXPECT]]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
macuda=$1
firmware=${2:-}
expect=${3:-init}
version=$(tr -d '[:space:]' <"$here/tinygrad.version")
scratch=$(mktemp -d)
server=
stop_server() { [ -n "$server" ] && kill -INT "$server" 2>/dev/null && wait "$server" 2>/dev/null; server=; }
trap 'stop_server; rm -rf "$scratch"' EXIT
if ! python3 -m venv "$scratch/venv" >/dev/null 2>&1 \
  || ! "$scratch/venv/bin/pip" install -q "tinygrad==$version" >"$scratch/pip.log" 2>&1; then
  echo "skipped: tinygrad $version could not be installed from PyPI ($(tail -1 "$scratch/pip.log" 2>/dev/null))"
  exit 3
fi
# A fresh simulated card on a free port; sets $endpoint.
serve() { # [EXTRA SIM ARGS...]
  stop_server
  "$macuda" sim serve tcp:0 --boot-ms 0 "$@" >"$scratch/serve.log" 2>&1 &
  server=$!
  endpoint=
  for _ in $(seq 100); do grep -q -- "--device remote:" "$scratch/serve.log" && break; sleep 0.05; done
  endpoint=$(sed -n 's/.*--device remote:\([0-9.]*:[0-9]*\).*/\1/p' "$scratch/serve.log" | head -1)
  [ -n "$endpoint" ] || { echo "the sim did not start:"; cat "$scratch/serve.log"; exit 1; }
}
serve
REMOTE=$endpoint "$scratch/venv/bin/python" "$here/probe.py" "$endpoint" || exit 1
if [ -z "$firmware" ]; then
  echo "skipped: tinygrad's boot of the sim needs NVIDIA's firmware (tests/sim/firmware.sh DIR, then pass DIR)"
  exit 0
fi
serve
# Twice on one card: the second run finds the firmware resident (WPR2 up),
# clears bus mastering, resets the card and boots it again, as on a card
# left booted by an earlier process.
for run in first second; do
  echo "tinygrad's boot, $run run on this card:"
  REMOTE=$endpoint "$scratch/venv/bin/python" "$here/boot.py" "$endpoint" "$firmware" "$expect" >"$scratch/boot.log" 2>&1
  rc=$?
  grep -E "^(tinygrad|the card|stages)" "$scratch/boot.log"
  if [ "$rc" -ne 0 ]; then cat "$scratch/boot.log"; echo "--- the sim:"; cat "$scratch/serve.log"; exit 1; fi
done
# A card whose GSP-RM sends a CPU-sequencer script before GSP_INIT_DONE and
# waits for it to have run: tinygrad's own executor runs the sim's script.
serve --boot-sequencer
echo "tinygrad's boot of a card whose GSP-RM sends a CPU-sequencer script:"
REMOTE=$endpoint "$scratch/venv/bin/python" "$here/boot.py" "$endpoint" "$firmware" "$expect" >"$scratch/boot.log" 2>&1
rc=$?
grep -E "^(tinygrad|the card|stages)" "$scratch/boot.log"
if [ "$rc" -ne 0 ]; then cat "$scratch/boot.log"; echo "--- the sim:"; cat "$scratch/serve.log"; exit 1; fi
# What tinygrad's boot and ours handed the card, field by field.
"$here/xcheck.sh" "$macuda" "$firmware" "$scratch/venv/bin/python" || exit 1
