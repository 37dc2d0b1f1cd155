#!/usr/bin/env bash
# Builds tests/device/cupti_trace.c on the GPU machine, against the CUPTI
# that comes with its CUDA toolkit (extras/CUPTI) or with a Python
# package (nvidia/cu13), and prints the library's path; exits 3, saying
# why, where there is no CUPTI or no cuda.h.
#
#   lib=$(bash tests/device/cupti-trace.sh OUTDIR)
#   CUDA_INJECTION64_PATH=$lib MACUDA_CUPTI_TRACE=trace.json PROGRAM...
set -u
out=${1:-/tmp/macuda-cupti}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
nvcc=${NVCC:-$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)}
cuda_include=
[ -n "$nvcc" ] && cuda_include=$(cd "$(dirname "$nvcc")/../include" 2>/dev/null && pwd)
[ -e "$cuda_include/cuda.h" ] || { echo "no cuda.h beside nvcc (${nvcc:-no nvcc})" >&2; exit 3; }
candidates=("$(dirname "$cuda_include")/extras/CUPTI")
site=$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))' 2>/dev/null)
[ -n "$site" ] && candidates+=("$site")
for c in "${candidates[@]}"; do
  inc=$c/include
  lib=$(ls -d "$c"/lib64 "$c"/lib 2>/dev/null | while read -r d; do ls "$d"/libcupti.so* >/dev/null 2>&1 && echo "$d"; done | head -1)
  [ -e "$inc/cupti.h" ] && [ -n "$lib" ] || continue
  so=$(ls "$lib"/libcupti.so* | head -1)
  if gcc -shared -fPIC -O2 -I "$cuda_include" -I "$inc" "$here/cupti_trace.c" "$so" \
      -Wl,-rpath,"$lib" -o "$out/libcupti_trace.so" >"$out/build.txt" 2>&1; then
    echo "$out/libcupti_trace.so"
    exit 0
  fi
done
echo "no CUPTI that builds (looked in ${candidates[*]}; $(tail -3 "$out/build.txt" 2>/dev/null))" >&2
exit 3
