#!/usr/bin/env bash
# Our cuBLAS on a GPU beside NVIDIA's (run from the repository root on a
# Linux machine with NVIDIA's kernel module, after tests/device/build.sh):
#
#  1. statuses: every bad argument's status, ours and NVIDIA's, byte for
#     byte (tests/cuda/cublas/statuses.cpp), dynamically linked and, for
#     ours, statically too;
#  2. gemm_check: every configuration against a CPU reference on NVIDIA's
#     cuBLAS (dumped), then on ours (compared with NVIDIA's outputs), also
#     with the kernel choice narrowed to mma.sync and to the plain kernels,
#     and those two again with our cuBLAS over NVIDIA's runtime;
#  3. gemm_bench: NVIDIA's, ours, NVIDIA's, ours, and the ratios;
#  4. order: the summation order of the sgemm shapes a decode depends on
#     (a mixture of experts' router over a prompt), NVIDIA's and ours, read
#     by tests/cuda/cublas/sum_order.cpp, and whether they are the same.
#
# Ours run with MACUDA_DEVICE=kernel and our libcudart.so.13 and
# libcublas.so.13 first on LD_LIBRARY_PATH; NVIDIA's with theirs (from
# the machine's CUDA or Python packages). Writes $OUT/cublas (default
# device-out/cublas): each run's output and summary.txt (appended to, so
# the parts can run at different times: CUBLAS_PARTS="statuses check
# bench order" by default).
set -u
cd "$(dirname "$0")/../.."
bin=target/device/cublas
out=${OUT:-device-out}/cublas
mkdir -p "$out"
export MACUDA_REPORT_DIR=${MACUDA_REPORT_DIR:-/tmp/macuda-device-reports}
mkdir -p "$MACUDA_REPORT_DIR"
summary="$out/summary.txt"
parts=" ${CUBLAS_PARTS:-statuses check bench order} "
say() { echo "$*" | tee -a "$summary"; }

# NVIDIA's libraries: the first directory holding libcublas.so.13.
nv=""
for d in $(python3 -c 'import nvidia, os; [print(os.path.join(p, "cu13", "lib")) for p in nvidia.__path__]' 2>/dev/null) \
         /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  if [ -e "$d/libcublas.so.13" ] && [ -e "$d/libcudart.so.13" ]; then nv=$d; break; fi
  if [ -e "$d/libcublas.so.13" ] && [ -z "$nv" ]; then nv=$d; fi
done
cudart_dir=$nv
[ -e "$nv/libcudart.so.13" ] || cudart_dir=$(dirname "$(ls /usr/local/cuda/lib64/libcudart.so.13 2>/dev/null | head -1)")
say "NVIDIA's cuBLAS: $nv ($(ls "$nv"/libcublas.so.13.* 2>/dev/null | xargs -n1 basename 2>/dev/null | tr '\n' ' '))"
theirs() { LD_LIBRARY_PATH="$nv:$cudart_dir" timeout --kill-after=5 "$@"; }
# Our cuBLAS over NVIDIA's runtime and libcuda: our kernels without our
# runtime, which tells a kernel's fault from the runtime's.
only_ours=$(mktemp -d)
cp "$bin/lib/libcublas.so.13" "$only_ours/"
kernels_only() { LD_LIBRARY_PATH="$only_ours:$cudart_dir" timeout --kill-after=5 "$@"; }
ours() { MACUDA_DEVICE=kernel LD_LIBRARY_PATH="$bin/lib" timeout --kill-after=5 "$@"; }

# 1. Statuses.
if [[ $parts == *" statuses "* ]]; then
theirs 60 "$bin/statuses" >"$out/statuses.nvidia.out" 2>"$out/statuses.nvidia.err"; rc_n=$?
ours 60 "$bin/statuses" >"$out/statuses.ours.out" 2>"$out/statuses.ours.err"; rc_o=$?
MACUDA_DEVICE=kernel timeout --kill-after=5 60 "$bin/statuses.static" >"$out/statuses.static.out" 2>"$out/statuses.static.err"; rc_s=$?
if cmp -s "$out/statuses.nvidia.out" "$out/statuses.ours.out" && cmp -s "$out/statuses.ours.out" "$out/statuses.static.out"; then
  say "statuses: identical ($(wc -l <"$out/statuses.ours.out") lines; exit NVIDIA $rc_n, ours $rc_o, ours static $rc_s)"
else
  say "statuses: DIFFERENT (exit NVIDIA $rc_n, ours $rc_o, ours static $rc_s)"
  diff "$out/statuses.nvidia.out" "$out/statuses.ours.out" | head -60 | tee -a "$summary"
  diff "$out/statuses.ours.out" "$out/statuses.static.out" | head -10 | tee -a "$summary"
fi

fi

# 2. Correctness.
if [[ $parts == *" check "* ]]; then
theirs 300 "$bin/gemm_check" --dump "$out/nvidia.dump" >"$out/check.nvidia.out" 2>&1
say "check on NVIDIA's cuBLAS: $(tail -1 "$out/check.nvidia.out")"
for kernels in auto mma simt; do
  MACUDA_CUBLAS_KERNELS=$kernels ours 600 "$bin/gemm_check" --compare "$out/nvidia.dump" \
    >"$out/check.ours-$kernels.out" 2>&1
  say "check on ours ($kernels): exit $?: $(tail -1 "$out/check.ours-$kernels.out")"
  grep -E "FAILED|FAIL " "$out/check.ours-$kernels.out" | head -20 | tee -a "$summary"
done
for kernels in mma simt; do
  MACUDA_CUBLAS_KERNELS=$kernels kernels_only 600 "$bin/gemm_check" --compare "$out/nvidia.dump" \
    >"$out/check.kernels-on-nvidia-runtime-$kernels.out" 2>&1
  say "check on our cuBLAS over NVIDIA's runtime ($kernels): exit $?: $(tail -1 "$out/check.kernels-on-nvidia-runtime-$kernels.out")"
  grep -E "FAILED|FAIL " "$out/check.kernels-on-nvidia-runtime-$kernels.out" | head -20 | tee -a "$summary"
done

fi

# 3. Speed, interleaved.
if [[ $parts == *" bench "* ]]; then
for round in 1 2; do
  theirs 300 "$bin/gemm_bench" >"$out/bench.nvidia.$round.out" 2>&1
  ours 300 "$bin/gemm_bench" >"$out/bench.ours.$round.out" 2>&1
done
python3 abi/cublas/bench/ratios.py "$out"/bench.nvidia.*.out -- "$out"/bench.ours.*.out | tee -a "$summary"
fi

# 4. Summation order, NVIDIA's and ours.
if [[ $parts == *" order "* ]]; then
for shape in "8 10 2048 tf32" "8 4 2048 tf32" "8 64 2048 tf32" "8 10 2048 default"; do
  tag=$(echo "$shape" | tr ' ' _)
  theirs 120 "$bin/sum_order" $shape 0 1 7 100 >"$out/order.$tag.nvidia.out" 2>&1
  ours 120 "$bin/sum_order" $shape 0 1 7 100 >"$out/order.$tag.ours.out" 2>&1
  if cmp -s "$out/order.$tag.nvidia.out" "$out/order.$tag.ours.out"; then
    say "order $shape: the same as NVIDIA's: $(sed -n 2p "$out/order.$tag.ours.out")"
  else
    say "order $shape: DIFFERENT from NVIDIA's"
    diff "$out/order.$tag.nvidia.out" "$out/order.$tag.ours.out" | cut -c1-400 | head -12 | tee -a "$summary"
  fi
done
fi
