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
#     by tests/cuda/cublas/sum_order.cpp, and whether they are the same
#     (ORDER_SHAPES="M,N,K,MATH ..." to choose others);
#  5. algos: the algorithm (tile, split-K) NVIDIA's cuBLAS picks for f32
#     TN sgemms with tf32 over a sweep of shapes (ALGO_M, ALGO_N, ALGO_K);
#  6. router: gemm_check's router cases alone, ours compared bit for bit
#     with NVIDIA's outputs.
#
# Ours run with MACUDA_DEVICE=kernel and our libcudart.so.13 and
# libcublas.so.13 first on LD_LIBRARY_PATH; NVIDIA's with theirs (from
# the machine's CUDA or Python packages). Writes $OUT/cublas (default
# device-out/cublas): each run's output and summary.txt (appended to, so
# the parts can run at different times: CUBLAS_PARTS="statuses check
# bench order algos router" by default).
set -u
cd "$(dirname "$0")/../.."
bin=target/device/cublas
out=${OUT:-device-out}/cublas
mkdir -p "$out"
export MACUDA_REPORT_DIR=${MACUDA_REPORT_DIR:-/tmp/macuda-device-reports}
mkdir -p "$MACUDA_REPORT_DIR"
summary="$out/summary.txt"
parts=" ${CUBLAS_PARTS:-statuses check bench order algos router} "
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
shapes=${ORDER_SHAPES:-"8,10,2048,tf32 8,4,2048,tf32 8,64,2048,tf32 8,10,2048,default"}
for shape in $shapes; do
  shape=${shape//,/ }
  tag=$(echo "$shape" | tr ' ' _)
  theirs 120 "$bin/sum_order" $shape 0 1 7 100 >"$out/order.$tag.nvidia.out" 2>&1
  # Which algorithm NVIDIA's cuBLAS picks for the shape (tile, split-K):
  # cublasLt's own log of its calls, each distinct line once.
  CUBLASLT_LOG_LEVEL=5 CUBLASLT_LOG_FILE="$out/order.$tag.lt.log" theirs 120 "$bin/sum_order" $shape 0 \
    >/dev/null 2>&1
  grep -o -E "algo=\[[^]]*\]|computeDesc=\[[^]]*\]" "$out/order.$tag.lt.log" 2>/dev/null | sort | uniq -c \
    | head -6 | sed "s/^/order $shape: NVIDIA's cublasLt: /" | tee -a "$summary"
  ours 120 "$bin/sum_order" $shape 0 1 7 100 >"$out/order.$tag.ours.out" 2>&1
  if cmp -s "$out/order.$tag.nvidia.out" "$out/order.$tag.ours.out"; then
    say "order $shape: the same as NVIDIA's: $(sed -n 2p "$out/order.$tag.ours.out")"
  else
    say "order $shape: DIFFERENT from NVIDIA's"
    diff "$out/order.$tag.nvidia.out" "$out/order.$tag.ours.out" | cut -c1-400 | head -12 | tee -a "$summary"
  fi
done
fi

# 6. The router GEMMs of gemm_check alone (f32 8 x n x 2048, tf32, as
# ggml's mixture-of-experts router over a prompt), NVIDIA's outputs
# compared bit for bit with ours: the bits decide which experts run.
if [[ $parts == *" router "* ]]; then
theirs 120 "$bin/gemm_check" --only router --dump "$out/router.nvidia.dump" >"$out/router.nvidia.out" 2>&1
ours 120 "$bin/gemm_check" --only router --compare "$out/router.nvidia.dump" >"$out/router.ours.out" 2>&1
say "router: exit $?: $(tail -1 "$out/router.ours.out")"
grep "same=" "$out/router.ours.out" | sed 's/^/  /' | tee -a "$summary"
fi

# 5. Which algorithm NVIDIA's cuBLAS picks for f32 TN sgemms with tf32
# allowed over a sweep of shapes (cublasLt's log of one call each): the
# split-K our tf32 sgemm follows to give NVIDIA's bits.
if [[ $parts == *" algos "* ]]; then
algos=$out/algos.txt
: >"$algos"
for m in ${ALGO_M:-8 16 64 128}; do for k in ${ALGO_K:-512 2048 4096}; do for n in ${ALGO_N:-1 2 4 8 10 16 32 64 128 512}; do
  log=$(mktemp)
  CUBLASLT_LOG_LEVEL=5 CUBLASLT_LOG_FILE="$log" theirs 60 "$bin/sum_order" "$m" "$n" "$k" tf32 -1 >/dev/null 2>&1
  echo "m=$m n=$n k=$k $(grep -o -E "algo=\[[^]]*\]" "$log" | sort -u | head -1)" >>"$algos"
  rm -f "$log"
done; done; done
say "algos: $(wc -l <"$algos") shapes in algos.txt; split-K counts: $(grep -o 'numSplitsK=[0-9]*' "$algos" | sort | uniq -c | tr '\n' ' ')"
fi
