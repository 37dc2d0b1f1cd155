#!/usr/bin/env bash
# The device checks: run on a Linux machine with NVIDIA's kernel module,
# from the repository root, after tests/device/build.sh (here or on a
# machine of the same architecture). Writes device.log and a summary to
# $OUT (default: device-out).
set -u
cd "$(dirname "$0")/../.."
bin=target/device
out=${OUT:-device-out}
mkdir -p "$out"
log="$out/device.log"
: >"$log"
pass=0
fail=0
step() {
  local name=$1
  shift
  echo "== $name" | tee -a "$log"
  "$@" >>"$log" 2>&1
  local rc=$?
  if [ "$rc" -eq 0 ]; then
    pass=$((pass + 1))
    echo "   ok" | tee -a "$log"
  else
    fail=$((fail + 1))
    echo "   FAILED (rc=$rc)" | tee -a "$log"
  fi
}
step "reference: nvidia-smi" nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv
step "macuda info --device kernel" "$bin/macuda" --device kernel info
step "kernel RM tests" "$bin/kernel_rm" --nocapture --test-threads=1
echo "passed $pass, failed $fail" | tee -a "$log" "$out/summary.txt"
cat "$log"
[ "$fail" -eq 0 ]
