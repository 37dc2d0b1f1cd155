#!/usr/bin/env bash
# Our staged boot against tinygrad's, on two fresh simulated cards that each
# record what their boot was handed (`macuda sim serve --boot-record`) and
# the context promotions GSP-RM took (`--rm-record`): tinygrad's driver
# (boot.py, its whole device initialisation, golden context included) on
# one, ours on the other (`macuda bench fill`: our boot to GSP_INIT_DONE,
# our golden context, then the fill), both with NVIDIA's 570.144 images
# from FIRMWARE_DIR; compare.py then prints the records field by field and
# fails on a difference without a documented reason. check.sh calls this
# with the python of its tinygrad environment. Exit 0: the records agree
# but for documented differences; 1: they do not, or a boot failed. With
# XCHECK_KEEP=DIR the two records are copied into DIR.
#
#   tests/sim/tinygrad/xcheck.sh MACUDA_BINARY FIRMWARE_DIR PYTHON
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
macuda=$1
firmware=$2
python=$3
scratch=$(mktemp -d)
server=
stop_server() { [ -n "$server" ] && kill -INT "$server" 2>/dev/null && wait "$server" 2>/dev/null; server=; }
trap 'stop_server; [ -n "${XCHECK_KEEP:-}" ] && cp "$scratch"/*.json "$XCHECK_KEEP"/; rm -rf "$scratch"' EXIT
# A fresh card recording its boot into RECORD; sets $endpoint.
serve() { # RECORD RM_RECORD
  stop_server
  "$macuda" sim serve tcp:0 --boot-ms 0 --boot-record "$1" --rm-record "$2" >"$scratch/serve.log" 2>&1 &
  server=$!
  endpoint=
  for _ in $(seq 100); do grep -q -- "--device remote:" "$scratch/serve.log" && break; sleep 0.05; done
  endpoint=$(sed -n 's/.*--device remote:\([0-9.]*:[0-9]*\).*/\1/p' "$scratch/serve.log" | head -1)
  [ -n "$endpoint" ] || { echo "the sim did not start:"; cat "$scratch/serve.log"; exit 1; }
}
# Wait for the served card to have written RECORD, then stop it.
collect() { # RECORD WHO RM_RECORD
  for _ in $(seq 100); do [ -s "$1" ] && [ -s "$3" ] && break; sleep 0.05; done
  stop_server
  [ -s "$1" ] || { echo "$2's boot left no record:"; cat "$scratch/serve.log"; exit 1; }
}

serve "$scratch/tinygrad.json" "$scratch/tinygrad-rm.json"
REMOTE=$endpoint "$python" "$here/boot.py" "$endpoint" "$firmware" init >"$scratch/boot.log" 2>&1 \
  || { cat "$scratch/boot.log"; echo "--- the sim:"; cat "$scratch/serve.log"; exit 1; }
collect "$scratch/tinygrad.json" tinygrad "$scratch/tinygrad-rm.json"

serve "$scratch/ours.json" "$scratch/ours-rm.json"
MACUDA_LOG=warn "$macuda" --device "remote:$endpoint" bench fill --firmware "$firmware" >"$scratch/ours.log" 2>&1 \
  || { cat "$scratch/ours.log"; echo "--- the sim:"; cat "$scratch/serve.log"; exit 1; }
collect "$scratch/ours.json" "our driver" "$scratch/ours-rm.json"

echo "what each boot handed the card, and the golden context's promotion, ours against tinygrad's:"
"$python" "$here/compare.py" "$scratch/ours.json" "$scratch/tinygrad.json" \
  "$scratch/ours-rm.json" "$scratch/tinygrad-rm.json"
