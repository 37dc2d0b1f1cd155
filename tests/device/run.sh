#!/usr/bin/env bash
# The device checks: run on a Linux machine with NVIDIA's kernel module,
# from the repository root, after tests/device/build.sh (here or on a
# machine of the same architecture). Every step has a time limit, so one
# that hangs costs its limit and no more. Writes to $OUT (default:
# device-out): device.log (everything), summary.txt (what passed), and the
# capture, benchmark and kernel-log excerpts.
set -u
cd "$(dirname "$0")/../.."
bin=target/device
out=${OUT:-device-out}
mkdir -p "$out"
log="$out/device.log"
: >"$log"
pass=0
fail=0
results=()
note() { echo "$*" | tee -a "$log"; }
# step NAME EXPECTED_RC LIMIT_S CMD...
step() {
  local name=$1 want=$2 limit=$3
  shift 3
  note "== $name"
  local started=$SECONDS
  timeout --kill-after=5 "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  local took=$((SECONDS - started))
  if [ "$rc" -eq "$want" ]; then
    pass=$((pass + 1))
    results+=("ok      $name (${took}s)")
    note "   ok (rc=$rc, ${took}s)"
  else
    fail=$((fail + 1))
    results+=("FAILED  $name (rc=$rc, wanted $want, ${took}s)")
    note "   FAILED (rc=$rc, wanted $want, ${took}s)"
  fi
}
export MACUDA_REPORT_DIR=/tmp/macuda-device-reports
mkdir -p "$MACUDA_REPORT_DIR"

step "reference: nvidia-smi" 0 30 nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv
step "macuda info --device kernel" 0 60 "$bin/macuda" --device kernel info
step "the stack on the GPU (tests/tests/gpu.rs)" 0 300 "$bin/gpu" --include-ignored --nocapture --test-threads=1
step "kernel RM, direct path (tests/tests/kernel_rm.rs)" 0 180 "$bin/kernel_rm" --include-ignored --nocapture --test-threads=1
step "macuda demo --device kernel" 0 120 "$bin/macuda" --device kernel demo
# One injected failure, recovered: the actor panics mid-workload, recovery
# stops our channels and frees our RM client (no reset, no PCI access),
# the report reads back, and a fresh process runs the demo again.
step "demo with submit panicking at its 40th request (exit 1 expected)" 1 120 \
  "$bin/macuda" --device kernel demo --inject submit:panic:40
report=$(ls -t "$MACUDA_REPORT_DIR"/*-failure.msgpack 2>/dev/null | head -1)
if [ -n "$report" ]; then
  step "macuda report of that failure" 0 30 "$bin/macuda" report "$report"
else
  fail=$((fail + 1)); results+=("FAILED  no failure report was written")
fi
step "demo again after the recovered failure" 0 120 "$bin/macuda" --device kernel demo
# The runner: the demo as one step, its driver's startup line echoed, the
# card's lock handed down and released; its exit is the step's (3 if it
# saw another process holding the card's files).
step "macuda run -- macuda demo (the runner on the GPU)" 0 120 \
  sh -c "MACUDA_LOCK_DIR=/tmp/macuda-device-locks '$bin/macuda' --device kernel run -- '$bin/macuda' demo > '$out/run-step.txt' 2>&1; rc=\$?; cat '$out/run-step.txt'; grep -q 'macuda run: driver: pid .*device kernel:0' '$out/run-step.txt' && exit \$rc; exit 9"

# What libcuda submits for our vector_add, decoded by our definitions.
step "capture-cuda vector_add (libcuda in its own process)" 0 120 \
  sh -c "'$bin/capture-cuda' tests/cuda/fixtures/vector_add.sm_90.cubin vector_add --grid 4 --block 256 --int 1024 --json '$out/capture-launches.json' > '$out/capture-vector_add.txt'"

# The launch benchmark: ours beside NVIDIA's runtime, side by side.
nvcc=${NVCC:-$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)}
ref=/tmp/macuda-launch-bench
if [ -n "$nvcc" ]; then
  step "nvcc the reference launch benchmark" 0 180 "$nvcc" -O2 -arch=sm_90 -o "$ref" tests/device/launch_bench.cu
else
  fail=$((fail + 1)); results+=("FAILED  no nvcc for the reference benchmark")
fi
step "macuda bench gpu (ours vs cudaLaunchKernel and CUDA graphs)" 0 240 \
  sh -c "'$bin/macuda' --device kernel bench gpu --launches 200000 --variants --reference '$ref' | tee '$out/bench-gpu.txt'"

# The CUDA runtime: each program linked against ours and against NVIDIA's
# cudart must print the same.
step "ABI programs: ours vs NVIDIA's cudart, byte for byte" 0 600 \
  sh -c "OUT='$out' bash tests/device/abi.sh | tee '$out/abi.txt'"

# Our cuBLAS beside NVIDIA's: statuses, correctness, speed.
step "cuBLAS: ours vs NVIDIA's (statuses, gemm_check, gemm_bench)" 0 900 \
  sh -c "OUT='$out' bash tests/device/cublas.sh"

# What the kernel log said about our faults (Xids), for the record.
dmesg 2>/dev/null | grep -i -E "xid|nvrm" | tail -40 > "$out/kernel-log.txt"
note "== kernel log (Xid lines)"
cat "$out/kernel-log.txt" >>"$log"

{
  printf '%s\n' "${results[@]}"
  echo "passed $pass, failed $fail"
} | tee "$out/summary.txt" | tee -a "$log"
[ "$fail" -eq 0 ]
