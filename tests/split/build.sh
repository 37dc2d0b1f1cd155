#!/usr/bin/env bash
# The user's build of llama.cpp (seed notes §08, §13): ggml-cuda split in
# two, linked against our static CUDA runtime and cuBLAS.
#
# A Mac has no nvcc, so each ggml-cuda translation unit is compiled twice:
# its device half by nvcc on Linux into a fat binary, its host half by clang
# (--cuda-host-only -nocudalib) embedding that fat binary, so that clang's
# registration code hands it to our runtime at start. llama.cpp itself is
# built once, CPU-only, by its own CMake; each program's link line, as that
# CMake generated it, is then replayed with the CUDA backend's registry
# object, the ggml-cuda archive and our libcublas.a and libcudart.a
# inserted ahead of the CPU backend. Nothing here writes a compile or link
# line by hand: every unit's flags come from a CUDA-configured (never
# built) CMake tree, every link line from the CPU build's.
#
#   tests/split/build.sh PHASE... [--arch sm_90|sm_120a] [--host linux-x86_64|macos-arm64]
#                        [--work DIR] [--src DIR] [--fatbins DIR] [--libs DIR] [--jobs N]
#
# Phases, in order (`all` is every one):
#   device  configure llama.cpp with its CUDA backend (nvcc: NVCC, else the
#           machine's, else NVIDIA's from PyPI), compile each unit's device
#           half into FATBINS/<unit>.fatbin and describe the units
#           (FATBINS/units.json). Runs on Linux; the result can be carried
#           to the machine that does the rest (--fatbins there).
#   host    each unit's host half with clang (CLANG, else clang++-19, else
#           clang++) against NVIDIA's CUDA 12.8 headers (PyPI, read from
#           the Linux wheels, so a Mac gets them too), the archive
#           libggml-cuda.a, and the registry object.
#   cpu     llama.cpp CPU-only and static, with its own CMake.
#   link    test-backend-ops, llama-simple and llama-bench: the CPU build's
#           link lines replayed with ours inserted, into WORK/bin; checks no
#           NVIDIA library is linked or needed.
#
# Defaults: --arch sm_90, --host this machine, --work target/split,
# --src .llama (tests/llama/source.sh fetches it), --fatbins WORK/fatbins,
# --libs WORK/libs (our libcudart.a and libcublas.a; cargo builds them
# there when missing).
set -euo pipefail
shopt -s inherit_errexit
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

arch=sm_90
case "$(uname -s)-$(uname -m)" in
    Darwin-arm64) host=macos-arm64 ;;
    *) host=linux-x86_64 ;;
esac
work=$root/target/split
src=$root/.llama
fatbins=
libs=
jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
phases=()
while [ $# -gt 0 ]; do
    case $1 in
        --arch) arch=$2; shift 2 ;;
        --host) host=$2; shift 2 ;;
        --work) work=$2; shift 2 ;;
        --src) src=$2; shift 2 ;;
        --fatbins) fatbins=$2; shift 2 ;;
        --libs) libs=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        device | host | cpu | link) phases+=("$1"); shift ;;
        all) phases+=(device host cpu link); shift ;;
        *) echo "unknown argument: $1 (see the comment at the top of $0)" >&2; exit 2 ;;
    esac
done
[ ${#phases[@]} -gt 0 ] || { echo "name a phase: device, host, cpu, link or all" >&2; exit 2; }
# SASS only (-real): our loader runs the cubin; PTX would only double the
# fat binaries every program carries.
# arch_list: the __CUDA_ARCH_LIST__ nvcc defines for it (both passes).
case $arch in
    sm_90) cmake_arch=90-real arch_list=900 ;;
    sm_120a) cmake_arch=120a-real arch_list=1200 ;;
    *) echo "--arch: sm_90 (H200) or sm_120a (RTX 5090)" >&2; exit 2 ;;
esac
case $host in
    linux-x86_64) target= ;;
    macos-arm64) target=arm64-apple-macos ;;
    *) echo "--host: linux-x86_64 or macos-arm64" >&2; exit 2 ;;
esac
mkdir -p "$work"
work=$(cd "$work" && pwd)
fatbins=${fatbins:-$work/fatbins}
libs=${libs:-$work/libs}
# Absolute: the phases run their tools from other directories.
[ -d "$fatbins" ] && fatbins=$(cd "$fatbins" && pwd)
[ -d "$libs" ] && libs=$(cd "$libs" && pwd)
[ -e "$src/CMakeLists.txt" ] || "$root/tests/llama/source.sh" "$src"
src=$(cd "$src" && pwd)
units=$fatbins/units.json
log=$work/logs
mkdir -p "$log"

# The options every llama.cpp configuration here shares.
llama_flags=(-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF
             -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=ON
             -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF)
programs=(test-backend-ops llama-simple llama-bench)

# CMake and Ninja: the machine's, else PyPI's.
build_tools() {
    if command -v cmake >/dev/null && command -v ninja >/dev/null; then return; fi
    local venv=${MACUDA_BUILD_VENV:-${TMPDIR:-/tmp}/macuda-build-venv}
    [ -x "$venv/bin/cmake" ] && [ -x "$venv/bin/ninja" ] || {
        python3 -m venv "$venv" && "$venv/bin/pip" install -q cmake ninja
    }
    export PATH="$venv/bin:$PATH"
}

# A CUDA toolkit root CMake accepts, printed: the machine's, else NVIDIA's
# 13.2 from PyPI laid out as CMake's FindCUDAToolkit expects (bin/,
# include/, lib64/ with the unversioned library names).
device_toolkit() {
    local nvcc=${NVCC:-$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1 || true)}
    if [ -n "$nvcc" ]; then
        (cd "$(dirname "$nvcc")/.." && pwd)
        return
    fi
    local pypi kit=$work/toolkit-13
    pypi=$("$root/abi/cublas/tests/headers.sh")
    rm -rf "$kit" && mkdir -p "$kit/lib64"
    ln -s "$pypi/bin" "$kit/bin"
    ln -s "$pypi/include" "$kit/include"
    ln -s "$pypi/nvvm" "$kit/nvvm"
    ln -s lib64 "$kit/lib"
    for f in "$pypi"/lib/*; do ln -s "$f" "$kit/lib64/"; done
    for name in cudart cublas cublasLt; do
        ln -s "$(ls "$pypi"/lib/lib$name.so.* | head -1)" "$kit/lib64/lib$name.so"
    done
    echo "$kit"
}

# NVIDIA's CUDA 12.8 headers (runtime, crt, cuBLAS, CCCL, cuRAND, which
# clang's CUDA wrapper includes) from PyPI's Linux wheels, unpacked, as a
# --cuda-path for clang (clang 19 does not parse CUDA 13's). Every
# CUDART_VERSION test in ggml-cuda is at or below 12.8, so the host halves
# see the same code paths as the device halves nvcc 13 compiled. Printed.
host_headers() {
    local dir=$work/cuda-12.8
    if [ ! -f "$dir/ready" ]; then
        rm -rf "$dir" && mkdir -p "$dir/wheels" "$dir/include" "$dir/bin"
        python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
            --platform manylinux_2_17_x86_64 --platform manylinux_2_27_x86_64 \
            -d "$dir/wheels" nvidia-cuda-runtime-cu12==12.8.90 nvidia-cuda-nvcc-cu12==12.8.93 \
            nvidia-cublas-cu12==12.8.4.1 nvidia-cuda-cccl-cu12==12.8.90 nvidia-curand-cu12==10.3.9.90 \
            || { echo "the CUDA 12.8 headers could not be fetched from PyPI" >&2; return 1; }
        for w in "$dir"/wheels/*.whl; do
            python3 - "$w" "$dir/include" <<'PY'
import sys, zipfile, os
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        parts = name.split("/")
        # nvidia/<package>/include/<header path>
        if len(parts) > 3 and parts[0] == "nvidia" and parts[2] == "include" and not name.endswith("/"):
            rel = "/".join(parts[3:])
            if rel.startswith("__") or "/__pycache__/" in rel:
                continue
            out = os.path.join(dest, rel)
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with z.open(name) as i, open(out, "wb") as o:
                o.write(i.read())
PY
        done
        rm -rf "$dir/wheels"
        touch "$dir/ready"
    fi
    echo "$dir"
}

the_clang() {
    local c=${CLANG:-$(command -v clang++-19 || command -v clang++ || true)}
    [ -n "$c" ] || { echo "no clang: install clang 17 or later (Debian: apt-get install clang-19), or set CLANG" >&2; exit 3; }
    echo "$c"
}

# macOS: the SDK clang must compile against; where there is none, say
# what is needed and stop.
mac_sysroot() {
    local sdk=${SDKROOT:-$(xcrun --show-sdk-path 2>/dev/null || true)}
    if [ -z "$sdk" ] || [ ! -d "$sdk" ]; then
        cat >&2 <<'EOF'
the host halves for macos-arm64 need a macOS SDK (Xcode's or the Command
Line Tools': xcrun --show-sdk-path, or SDKROOT=DIR). None is here, and none
can be fetched on this machine. On a Mac: the device halves (FATBINS, from
`tests/split/build.sh device` on Linux) plus `tests/split/build.sh host cpu
link --host macos-arm64 --fatbins FATBINS`, with a clang that compiles CUDA
(LLVM 17 or later; Apple's clang does not).
EOF
        exit 3
    fi
    echo "$sdk"
}

# Run each line of a file as a job, JOBS at a time; stop on the first
# failure, showing its log.
run_jobs() {
    local list=$1 name=$2
    local n
    n=$(wc -l < "$list")
    echo "$name: $n units, $jobs at a time"
    if ! xargs -P "$jobs" -d '\n' -I{} sh -c '{}' < "$list" > "$log/$name.log" 2>&1; then
        grep -m 20 -E 'error|Error' "$log/$name.log" || tail -20 "$log/$name.log"
        echo "$name: failed (all of it in $log/$name.log)" >&2
        exit 1
    fi
}

phase_device() {
    local started=$SECONDS kit config=$work/cuda-config
    build_tools
    kit=$(device_toolkit)
    echo "device: nvcc $("$kit/bin/nvcc" --version | grep -o 'release [0-9.]*'), for $arch"
    rm -rf "$config"
    cmake -S "$src" -B "$config" -G Ninja "${llama_flags[@]}" -DGGML_CUDA=ON \
        -DCUDAToolkit_ROOT="$kit" -DCMAKE_CUDA_COMPILER="$kit/bin/nvcc" \
        -DCMAKE_CUDA_ARCHITECTURES="$cmake_arch" -DGGML_CUDA_NO_VMM=ON -DGGML_CUDA_NCCL=OFF \
        -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > "$log/cuda-config.log" 2>&1 \
        || { tail -30 "$log/cuda-config.log"; exit 1; }
    # Generated sources the units include (none are built).
    mkdir -p "$fatbins"
    python3 "$here/units.py" device "$config" "$fatbins" > "$work/device-jobs.txt"
    run_jobs "$work/device-jobs.txt" device
    python3 "$here/units.py" describe "$config" "$src" > "$units"
    # What the host halves need to name the kernels as nvcc did: the
    # architecture list nvcc defines (CUB's namespace carries it) and this
    # nvcc's CCCL headers (CUB's namespace carries its version too, and
    # its kernels' template arguments differ between versions).
    echo "$arch_list" > "$fatbins/arch-list"
    rm -rf "$fatbins/cccl" && mkdir -p "$fatbins/cccl"
    if [ -d "$kit/include/cccl" ]; then
        cp -r "$kit/include/cccl/." "$fatbins/cccl/"
    else
        for d in cub thrust cuda nv; do cp -r "$kit/include/$d" "$fatbins/cccl/"; done
    fi
    echo "device: $(python3 "$here/units.py" count "$units") units' fat binaries in $fatbins ($(du -sh "$fatbins" | cut -f1), with nvcc's CCCL headers) in $((SECONDS - started)) s"
}

# Every kernel a host half registers must be one its fat binary holds, by
# the names our runtime matches: `macuda inspect` reads clang's stubs from
# each object (MACUDA, else this checkout's release build, made if
# missing). A name the two compilers spell differently would otherwise
# surface only when a program first launches that kernel.
check_registrations() {
    local objects=$1 macuda=${MACUDA:-${CARGO_TARGET_DIR:-$root/target}/release/macuda} bad=0 o seen
    if [ ! -x "$macuda" ]; then
        cargo build -q --release -p macuda-supervisor --bin macuda --manifest-path "$root/Cargo.toml"
    fi
    for o in "$objects"/*.o; do
        seen=$("$macuda" inspect "$o" | grep -E "^registered by clang|^  not found: " || true)
        if grep -q "not found" <<<"$seen"; then
            echo "host: $(basename "$o"): $seen" >&2
            bad=$((bad + 1))
        fi
    done
    [ "$bad" = 0 ] || { echo "host: $bad host halves register kernels their fat binaries lack" >&2; exit 1; }
    echo "host: every kernel each host half registers is in its fat binary"
}

phase_host() {
    local started=$SECONDS clang headers objects=$work/host sysroot=
    [ -f "$units" ] || { echo "no $units: run the device phase first (or give --fatbins)" >&2; exit 2; }
    clang=$(the_clang)
    headers=$(host_headers)
    [ -n "$target" ] && sysroot=$(mac_sysroot)
    # The host half compiles no device code, so the GPU architecture clang
    # is told only has to be one it knows (clang 19 predates sm_120).
    local clang_arch=$arch
    if ! echo | "$clang" -x cuda --cuda-host-only -nocudalib -nocudainc --cuda-gpu-arch="$arch" \
            -fsyntax-only - >/dev/null 2>&1; then
        clang_arch=sm_90
        echo "host: this clang does not know $arch; its host-only compiles name $clang_arch (no device code is compiled)"
    fi
    if [ ! -d "$fatbins/cccl" ] || [ ! -f "$fatbins/arch-list" ]; then
        echo "host: $fatbins has no cccl/ or arch-list (a device phase before they were kept): CUB's kernels will not match the device halves'; run the device phase again" >&2
        exit 2
    fi
    echo "host: $("$clang" --version | head -1), CUDA 12.8 headers with the device nvcc's CCCL, for $host"
    rm -rf "$objects" && mkdir -p "$objects"
    python3 "$here/units.py" host "$units" "$fatbins" "$objects" "$clang" "$headers" "$clang_arch" "$src" \
        ${target:+"$target"} ${sysroot:+"$sysroot"} > "$work/host-jobs.txt"
    run_jobs "$work/host-jobs.txt" host
    local cxx=$clang
    python3 "$here/units.py" registry "$units" "$work" "$cxx" "$src" \
        ${target:+"$target"} ${sysroot:+"$sysroot"} > "$work/registry-job.txt"
    sh "$work/registry-job.txt" > "$log/registry.log" 2>&1 || { cat "$log/registry.log"; exit 1; }
    check_registrations "$objects"
    rm -f "$work/libggml-cuda.a"
    ar rcs "$work/libggml-cuda.a" "$objects"/*.o
    echo "host: $(ls "$objects" | wc -l) host halves in libggml-cuda.a, and ggml-backend-reg-cuda.o, in $((SECONDS - started)) s"
}

phase_cpu() {
    local started=$SECONDS cpu=$work/cpu
    build_tools
    cmake -S "$src" -B "$cpu" -G Ninja "${llama_flags[@]}" -DGGML_CUDA=OFF > "$log/cpu-config.log" 2>&1 \
        || { tail -30 "$log/cpu-config.log"; exit 1; }
    ninja -C "$cpu" -j "$jobs" "${programs[@]}" > "$log/cpu-build.log" 2>&1 \
        || { tail -30 "$log/cpu-build.log"; exit 1; }
    echo "cpu: llama.cpp CPU-only, static: ${programs[*]} in $((SECONDS - started)) s"
}

# What our static libraries need from the system when linked into a
# program (Rust's standard library's needs, as rustc reports them with
# --print native-static-libs).
our_system_libs() {
    case $host in
        linux-x86_64) echo "-lpthread -ldl -lm -lrt -lgcc_s -lc" ;;
        macos-arm64) echo "-lSystem -lc -lm -liconv" ;;
    esac
}

phase_link() {
    local cpu=$work/cpu out=$work/bin
    build_tools
    if [ ! -f "$libs/libcudart.a" ] || [ ! -f "$libs/libcublas.a" ]; then
        # Only the static libraries: what a link needs, on Linux and macOS alike.
        cargo build -q --release -p macuda-abi -p macuda-cublas --lib --manifest-path "$root/Cargo.toml"
        mkdir -p "$libs"
        cp "${CARGO_TARGET_DIR:-$root/target}/release/libcudart.a" "${CARGO_TARGET_DIR:-$root/target}/release/libcublas.a" "$libs/"
    fi
    [ -f "$work/libggml-cuda.a" ] || { echo "no libggml-cuda.a: run the host phase first" >&2; exit 2; }
    mkdir -p "$out"
    local p line ours
    ours="$work/ggml-backend-reg-cuda.o $work/libggml-cuda.a $libs/libcublas.a $libs/libcudart.a"
    for p in "${programs[@]}"; do
        # The last command ninja would run for the program is its link.
        line=$(ninja -C "$cpu" -t commands "$p" | tail -1)
        python3 "$here/relink.py" "$line" "$p" "$out/$p" "$ours" "$(our_system_libs)" > "$work/link-$p.sh"
        (cd "$cpu" && sh "$work/link-$p.sh") > "$log/link-$p.log" 2>&1 \
            || { tail -30 "$log/link-$p.log"; exit 1; }
    done
    echo "link: ${programs[*]} in $out, ours ahead of the CPU backend (the replayed lines: $work/link-*.sh)"
    if [ "$host" = linux-x86_64 ]; then
        local bad=0
        for p in "${programs[@]}"; do
            if ldd "$out/$p" | grep -Ei 'libcud|libcublas|libnvidia|libnvrtc'; then bad=1; fi
        done
        [ "$bad" = 0 ] || { echo "link: an NVIDIA library is linked" >&2; exit 1; }
        echo "link: no NVIDIA library in any (ldd $out/test-backend-ops:)"
        ldd "$out/test-backend-ops" | sed 's/^/  /'
    fi
}

for phase in "${phases[@]}"; do
    "phase_$phase"
done
