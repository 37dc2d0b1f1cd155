# Sourced by the side-by-side device benchmarks (kernel-chain.sh,
# case-cost.sh), from the repository root: `rounds NAME [ARGS...]` builds
# tests/device/NAME.cu with the GPU machine's nvcc against NVIDIA's shared
# cudart into OUT/NAME, then runs it with ARGS twice a side, stock first
# and ours after it (MACUDA_DEVICE=kernel, our libraries from MACUDA_LIBS,
# default target/device/cublas/lib, and OURS_ENV="K=V ..."), into
# OUT/{stock,ours}.{1,2}.txt. With OTHER_ENV set, a third side, ours with
# those variables instead, runs after ours each round into
# OUT/other.{1,2}.txt. With LOAD=N, N busy loops keep the CPUs busy for
# every side alike (a build or a parallel op suite beside the program).
# The caller sets `out`; exits 1 where nvcc fails.
rounds() {
  local name=$1
  shift
  local lib=${MACUDA_LIBS:-target/device/cublas/lib}
  local nvcc=${NVCC:-$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)}
  local bin=$out/$name ours_env other_env round load=() i
  "$nvcc" -O2 -arch=sm_90 -cudart shared -o "$bin" "tests/device/$name.cu" || { echo "nvcc failed"; exit 1; }
  read -r -a ours_env <<<"${OURS_ENV:-}"
  read -r -a other_env <<<"${OTHER_ENV:-}"
  for ((i = 0; i < ${LOAD:-0}; i++)); do
    (while :; do :; done) &
    load+=($!)
  done
  for round in 1 2; do
    timeout 120 "$bin" "$@" >"$out/stock.$round.txt" 2>&1
    env "${ours_env[@]}" MACUDA_DEVICE=kernel LD_LIBRARY_PATH="$lib" timeout 120 "$bin" "$@" >"$out/ours.$round.txt" 2>&1
    if [ -n "${OTHER_ENV:-}" ]; then
      env "${other_env[@]}" MACUDA_DEVICE=kernel LD_LIBRARY_PATH="$lib" timeout 120 "$bin" "$@" >"$out/other.$round.txt" 2>&1
    fi
  done
  if [ ${#load[@]} -gt 0 ]; then
    kill "${load[@]}" 2>/dev/null
    wait "${load[@]}" 2>/dev/null
  fi
  return 0
}
