#!/usr/bin/env bash
# CI's check of the split build (tests/split/build.sh), which as a whole
# needs a GPU machine's cores for its 144 device halves:
#   1. units.py on a made-up CMake tree: the device commands are nvcc's own
#      with -c turned into --fatbin, the description is portable, the host
#      commands embed each unit's fat binary, a registry without
#      GGML_USE_CUDA is refused;
#   2. relink.py on a made-up ninja link line: ours go ahead of ggml's own
#      archives, a line without the CPU backend is refused; ops-ours.sh on
#      a made-up test-backend-ops (a run that never tested CUDA0 is not a
#      pass);
#   3. one real ggml-cuda unit (arange.cu) split for real: its device half
#      by NVIDIA's nvcc from PyPI, its host half by clang 19 against the
#      CUDA 12.8 headers, and `macuda inspect` finds the kernel in the host
#      object's embedded fat binary. Skipped (and said) without clang 19;
#   4. a decode-shaped program of ours (toy/toy_decode.cu; llama.cpp's
#      whole split build does not fit CI, see the README) split the same
#      way for sm_120a, the null device's GB202, linked with our release
#      libcudart.a (cargo builds it) and no NVIDIA library, and run on the
#      null device by per-token.sh at 16 and 80 tokens. Fails unless each
#      token is one replay of the graph's kernels and four runtime calls,
#      every token's input comes back intact, and the logits stay zero
#      (the null device runs no kernel). Skipped with step 3.
#
#   tests/split/check.sh MACUDA     (the built macuda binary)
set -euo pipefail
shopt -s inherit_errexit
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
macuda=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "split check: $*" >&2; exit 1; }

# 1. units.py
cfg=$scratch/cfg
src=$scratch/llama
mkdir -p "$cfg" "$src/ggml/src/ggml-cuda/template-instances" "$src/ggml/include"
cat > "$cfg/compile_commands.json" <<EOF
[
 {"directory": "$cfg", "file": "$src/ggml/src/ggml-cuda/add.cu",
  "command": "/cuda/bin/nvcc -forward-unknown-to-host-compiler -DGGML_X=1 -I$src/ggml/src/ggml-cuda/.. -I$src/ggml/include -isystem /cuda/include -O3 -std=c++17 \"--generate-code=arch=compute_90,code=[sm_90]\" -Xcompiler \"-Wall -Wextra\" -MD -MT a.o -MF a.o.d -x cu -c $src/ggml/src/ggml-cuda/add.cu -o a.o"},
 {"directory": "$cfg", "file": "$src/ggml/src/ggml-cuda/template-instances/mmq-q4_0.cu",
  "command": "/cuda/bin/nvcc -DGGML_X=1 -Xcompiler=-fPIC,-O2 -x cu -c $src/ggml/src/ggml-cuda/template-instances/mmq-q4_0.cu -o b.o"},
 {"directory": "$cfg", "file": "$src/ggml/src/ggml-backend-reg.cpp",
  "command": "/usr/bin/c++ -DGGML_USE_CPU -DGGML_USE_CUDA -I$src/ggml/include -O3 -o r.o -c $src/ggml/src/ggml-backend-reg.cpp"},
 {"directory": "$cfg", "file": "$src/ggml/src/ggml.c", "command": "/usr/bin/cc -c $src/ggml/src/ggml.c -o g.o"}
]
EOF
dev=$(python3 "$here/units.py" device "$cfg" /fat)
[ "$(wc -l <<<"$dev")" = 2 ] || fail "device: expected 2 commands, got: $dev"
grep -q -- "--fatbin -o /fat/add.fatbin $src/ggml/src/ggml-cuda/add.cu\$" <<<"$dev" || fail "device: $dev"
grep -q -- "-o /fat/template-instances__mmq-q4_0.fatbin" <<<"$dev" || fail "device names: $dev"
if grep -qE -- ' -c | -MD | -MF |a\.o' <<<"$dev"; then fail "device: -c, dependency files or the object left in: $dev"; fi
python3 "$here/units.py" describe "$cfg" "$src" > "$scratch/units.json"
[ "$(python3 "$here/units.py" count "$scratch/units.json")" = 2 ] || fail "describe: count"
if grep -q "$scratch" "$scratch/units.json"; then fail "describe: a path of this machine in units.json"; fi
grep -q '"@LLAMA@/ggml/src"' "$scratch/units.json" || fail "describe: includes not portable"
if grep -q '/cuda/include' "$scratch/units.json"; then fail "describe: the toolkit's includes kept"; fi
host=$(python3 "$here/units.py" host "$scratch/units.json" /fat /obj clang++ /cuda12 sm_90 /here/llama arm64-apple-macos /sdk)
for want in "-x cuda --cuda-host-only -nocudalib --cuda-path=/cuda12 --cuda-gpu-arch=sm_90" \
            "-target arm64-apple-macos -isysroot /sdk" "-DGGML_X=1 -I /here/llama/ggml/src -I /here/llama/ggml/include -O3 -std=c++17 -Wall -Wextra" \
            "-Xclang -fcuda-include-gpubinary -Xclang /fat/add.fatbin -c /here/llama/ggml/src/ggml-cuda/add.cu -o /obj/add.o" \
            "-fPIC -O2"; do
    grep -qF -- "$want" <<<"$host" || fail "host: \`$want\` missing from: $host"
done
if grep -q -- "--generate-code\|-MD\|forward-unknown" <<<"$host"; then fail "host: nvcc's own flags left in: $host"; fi
grep -qF -- "-Wno-unknown-cuda-version -fclang-abi-compat=17" <<<"$host" || fail "host: not clang 17's mangling: $host"
# With what the device phase keeps beside the fat binaries: nvcc's
# architecture list and its CCCL headers, ahead of the CUDA path's.
fat=$scratch/fat
mkdir -p "$fat/cccl"
echo 900 > "$fat/arch-list"
host=$(python3 "$here/units.py" host "$scratch/units.json" "$fat" /obj clang++ /cuda12 sm_90 /here/llama)
grep -qF -- "-fclang-abi-compat=17 -D__CUDA_ARCH_LIST__=900 -isystem $(cd "$fat/cccl" && pwd -P)" <<<"$host" \
    || fail "host: the device compiler's architecture list and CCCL not passed: $host"
reg=$(python3 "$here/units.py" registry "$scratch/units.json" /obj c++ /here/llama)
grep -qF -- "c++ -DGGML_USE_CPU -DGGML_USE_CUDA -I /here/llama/ggml/include -O3 -c /here/llama/ggml/src/ggml-backend-reg.cpp -o /obj/ggml-backend-reg-cuda.o" <<<"$reg" \
    || fail "registry: $reg"
sed -i 's/ -DGGML_USE_CUDA//' "$cfg/compile_commands.json"
if python3 "$here/units.py" describe "$cfg" "$src" >/dev/null 2>&1; then fail "describe: a registry without GGML_USE_CUDA accepted"; fi
echo "units.py: device, describe, host and registry commands as CMake's tree implies"

# 2. relink.py
line=': && /usr/bin/c++ -O3 -DNDEBUG  tests/CMakeFiles/t.dir/t.cpp.o -o bin/test-backend-ops  common/libllama-common.a src/libllama.a ggml/src/libggml.a ggml/src/libggml-cpu.a ggml/src/libggml-base.a -lgomp && :'
got=$(python3 "$here/relink.py" "$line" test-backend-ops /out/test-backend-ops "reg.o cuda.a blas.a rt.a" "-lpthread -ldl")
want='/usr/bin/c++ -O3 -DNDEBUG tests/CMakeFiles/t.dir/t.cpp.o -o /out/test-backend-ops common/libllama-common.a src/libllama.a reg.o cuda.a blas.a rt.a ggml/src/libggml.a ggml/src/libggml-cpu.a ggml/src/libggml-base.a -lgomp -lpthread -ldl'
[ "$got" = "$want" ] || fail "relink: got $got"
if python3 "$here/relink.py" "${line/ggml\/src\/libggml-cpu.a /}" test-backend-ops /o "x" "" >/dev/null 2>&1; then fail "relink: no CPU backend accepted"; fi
if python3 "$here/relink.py" "$line" llama-simple /o "x" "" >/dev/null 2>&1; then fail "relink: another program's line accepted"; fi
echo "relink.py: ours ahead of ggml's archives; a line without the CPU backend or for another program refused"

# 2b. ops-ours.sh on a made-up test-backend-ops: OPA passes both its
# cases, OPB fails one, and OPC's run never tested CUDA0 (the runtime
# could not open a card: test-backend-ops then skips the backend and
# exits 0), which must not count as passed. OPS_FIRST=OPC runs it first.
fake=$scratch/ops-fake
mkdir -p "$fake"
cat >"$fake/test-backend-ops" <<'FAKE'
#!/usr/bin/env bash
if [ "$1" = --list-ops ]; then printf 'GGML operations:\n  OPA\n  OPB\n  OPC\n\nTotal: 3 operations\n'; exit 0; fi
op=$3
if [ "$op" = OPC ]; then printf 'Testing 1 devices\n\nBackend 1/1: CPU\n  Skipping\n1/1 backends passed\n'; exit 0; fi
echo "Backend 1/1: CUDA0"
echo "  $op(ne=[1,1]): OK"
if [ "$op" = OPB ]; then echo "[$op] ERR = 0.5 > 0.1   $op(ne=[2,1]): FAIL"; echo "  Backend CUDA0: FAIL"; exit 1; fi
echo "  $op(ne=[2,1]): OK"
echo "  Backend CUDA0: OK"
FAKE
chmod +x "$fake/test-backend-ops"
ours_rc=0
ours=$(JOBS=2 OPS_FIRST=OPC bash "$here/ops-ours.sh" "$fake" "$fake/out") || ours_rc=$?
[ "$ours_rc" = 1 ] || fail "ops-ours.sh exited $ours_rc on a suite with a failure: $ours"
[ "$(head -1 <<<"$ours")" = "OPC: CUDA0 was not tested (exit 0; see ops-OPC.txt)" ] || fail "ops-ours.sh: OPC first, untested: $ours"
for want in "OPA: 2 cases, every one passed" "OPB: 1 passed, 1 failed, exit 1" "ops: 3; all passed: 1; open: 2; not run: 0"; do
  grep -qF "$want" <<<"$ours" || fail "ops-ours.sh: no '$want' in: $ours"
done
echo "ops-ours.sh: a made-up suite read as made (a failure, and a run that never tested CUDA0 not counted)"

# 3. One real unit, split.
clang=${CLANG:-$(command -v clang++-19 || true)}
if [ -z "$clang" ]; then
    echo "skipped: one ggml-cuda unit split for real, and our decode-shaped program split and run on the null device: clang 19 is not installed"
    exit 0
fi
llama=$scratch/llama-src
"$root/tests/llama/source.sh" "$llama" >/dev/null
kit=$("$root/abi/cublas/tests/headers.sh")
unit=$llama/ggml/src/ggml-cuda/arange.cu
inc=(-I "$llama/ggml/src" -I "$llama/ggml/include")
"$kit/bin/nvcc" --fatbin -arch=sm_90 -std=c++17 -O3 "${inc[@]}" -DGGML_CUDA_NO_VMM -o "$scratch/arange.fatbin" "$unit"
work=$scratch/work
mkdir -p "$work"
headers=$(work=$work; source <(sed -n '/^host_headers()/,/^}/p' "$here/build.sh"); host_headers)
"$clang" -x cuda --cuda-host-only -nocudalib --cuda-path="$headers" --cuda-gpu-arch=sm_90 -Wno-unknown-cuda-version -fclang-abi-compat=17 \
    -std=c++17 -O3 "${inc[@]}" -DGGML_CUDA_NO_VMM -Xclang -fcuda-include-gpubinary -Xclang "$scratch/arange.fatbin" \
    -c "$unit" -o "$scratch/arange.o" 2> "$scratch/clang.err" || { cat "$scratch/clang.err"; fail "clang's host half"; }
seen=$("$macuda" inspect "$scratch/arange.o")
grep -q "input: host object" <<<"$seen" && grep -q "kernel _Z10arange_f32Pfiff" <<<"$seen" \
    || fail "the host object's fat binary: $seen"
nm "$scratch/arange.o" | grep -q " U __cudaRegisterFunction" || fail "no registration in the host half"
grep -q "^registered by clang's host code: 1 kernels, every one found in the fat binaries$" <<<"$seen" \
    || fail "the host half's registrations against its fat binary: $seen"
echo "one ggml-cuda unit (arange.cu) split: nvcc's fat binary inside clang's host object, its kernel registered"

# 4. Our decode-shaped program, split for sm_120a, on the null device.
started=$SECONDS
toy=$here/toy/toy_decode.cu
# The line .ci/run builds macuda with: nothing more to build there, and the
# two targets share their dependencies' builds.
cargo build -q --release -p macuda-supervisor --bin macuda -p macuda-abi --lib --manifest-path "$root/Cargo.toml"
cudart=${CARGO_TARGET_DIR:-$root/target}/release/libcudart.a
# As build.sh: SASS only; the host-only compile names an architecture this
# clang knows (clang 19 predates sm_120) and compiles no device code.
"$kit/bin/nvcc" --fatbin "--generate-code=arch=compute_120a,code=[sm_120a]" -std=c++17 -O3 \
    -o "$scratch/toy_decode.fatbin" "$toy"
clang_arch=sm_120a
echo | "$clang" -x cuda --cuda-host-only -nocudalib -nocudainc --cuda-gpu-arch=$clang_arch -fsyntax-only - \
    >/dev/null 2>&1 || clang_arch=sm_90
"$clang" -x cuda --cuda-host-only -nocudalib --cuda-path="$headers" --cuda-gpu-arch=$clang_arch -Wno-unknown-cuda-version -fclang-abi-compat=17 \
    -std=c++17 -O2 -Xclang -fcuda-include-gpubinary -Xclang "$scratch/toy_decode.fatbin" \
    -c "$toy" -o "$scratch/toy_decode.o" 2> "$scratch/clang.err" || { cat "$scratch/clang.err"; fail "the toy's host half"; }
# Our static runtime's needs from the system (build.sh's our_system_libs).
"$clang" -o "$scratch/toy_decode" "$scratch/toy_decode.o" "$cudart" -lpthread -ldl -lm -lrt -lgcc_s -lc
"$macuda" inspect "$scratch/toy_decode.o" | grep -q "^registered by clang's host code: [0-9]* kernels, every one found in the fat binaries$" \
    || fail "the toy's registrations against its fat binary: $("$macuda" inspect "$scratch/toy_decode.o" | grep -A3 '^registered')"
if ldd "$scratch/toy_decode" | grep -Ei 'libcud|libcublas|libnvidia|libnvrtc'; then fail "the toy links an NVIDIA library"; fi
runs=$scratch/toy-runs
"$here/per-token.sh" --keep "$runs" toy_decode 16 80 "$scratch/toy_decode" @N@
out=$(cat "$runs/run-80/out.txt")
read -r _ launches _ graph _ calls _ < "$runs/per-token.txt"
kernels=$(sed -n 's/^graph: \([0-9]*\) nodes (the shape.s \1 kernels).*/\1/p' <<<"$out")
[ -n "$kernels" ] || fail "the toy's graph does not hold the kernels its shape implies: $out"
[ "$launches" = "$kernels" ] && [ "$graph" = "$kernels" ] \
    || fail "per token: $launches launches, $graph from graphs; the toy's graph has $kernels kernels"
[ "$calls" = 4 ] || fail "per token: $calls runtime calls; the toy makes 4 (copy in, graph launch, copy back, sync)"
grep -q '^decoded 80 tokens$' <<<"$out" || fail "the toy's output: $out"
grep -qE '^inputs: 80 of 80 came back intact \(fnv-1a ([0-9a-f]{16}) sent, \1 back\)$' <<<"$out" \
    || fail "the toy's inputs did not come back: $out"
grep -q '^logits: sum of magnitudes 0, last token 0$' <<<"$out" \
    || fail "the toy's logits changed on the null device, which runs no kernel: $out"
echo "our decode-shaped program split for sm_120a: per token one graph of $kernels kernels and $calls runtime calls on the null device, inputs intact (step 4: $((SECONDS - started)) s)"
