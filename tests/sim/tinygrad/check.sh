#!/usr/bin/env bash
# tinygrad's own TinyGPU client against `macuda sim serve`: tinygrad
# (pinned in tinygrad.version beside this script) from PyPI into a virtual
# environment in the temp directory, never vendored; the sim on a free TCP
# port of 127.0.0.1; probe.py's checks. Exit 0: all passed; 1: a check
# failed; 3: skipped (tinygrad could not be installed), with the reason.
#
#   tests/sim/tinygrad/check.sh MACUDA_BINARY
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
macuda=$1
version=$(tr -d '[:space:]' <"$here/tinygrad.version")
scratch=$(mktemp -d)
server=
cleanup() { [ -n "$server" ] && kill -INT "$server" 2>/dev/null; wait 2>/dev/null; rm -rf "$scratch"; }
trap cleanup EXIT
if ! python3 -m venv "$scratch/venv" >/dev/null 2>&1 \
  || ! "$scratch/venv/bin/pip" install -q "tinygrad==$version" >"$scratch/pip.log" 2>&1; then
  echo "skipped: tinygrad $version could not be installed from PyPI ($(tail -1 "$scratch/pip.log" 2>/dev/null))"
  exit 3
fi
"$macuda" sim serve tcp:0 --boot-ms 0 >"$scratch/serve.log" 2>&1 &
server=$!
for _ in $(seq 100); do grep -q -- "--device remote:" "$scratch/serve.log" && break; sleep 0.05; done
endpoint=$(sed -n 's/.*--device remote:\([0-9.]*:[0-9]*\).*/\1/p' "$scratch/serve.log" | head -1)
[ -n "$endpoint" ] || { echo "the sim did not start:"; cat "$scratch/serve.log"; exit 1; }
REMOTE=$endpoint "$scratch/venv/bin/python" "$here/probe.py" "$endpoint"
