#!/usr/bin/env python3
"""The split build's per-unit commands, derived from what CMake generated.

A CUDA-configured llama.cpp build tree (never built) holds, in
compile_commands.json, nvcc's command for every ggml-cuda translation unit
and the host compiler's for ggml-backend-reg.cpp with the CUDA backend
registered. From those, and nothing written by hand:

  device   CONFIG FATBINS
           prints nvcc's own command for each unit with -c turned into
           --fatbin: the unit's device half, a fat binary in FATBINS
  describe CONFIG SRC > units.json
           what the host halves need, portable to another machine (the
           Mac): each unit's source below SRC and its host flags (defines,
           includes below SRC, language standard, optimisation, the host
           compiler's flags), and the registry object's flags
  host     UNITS FATBINS OBJECTS CLANG CUDA_PATH ARCH SRC [TARGET [SYSROOT]]
           prints clang's host-only compile of each unit, embedding its fat
           binary (-fcuda-include-gpubinary): the unit's host half, whose
           registration code hands the fat binary to our runtime. So that
           its kernel names are the ones nvcc gave the device half, it
           mangles as clang 17 did (clang 18 spells out the type of a
           template parameter whose argument is a function template's
           specialization, `Tn...`, which nvcc does not), defines
           __CUDA_ARCH_LIST__ as nvcc did (FATBINS/arch-list: CUB's kernels
           live in a namespace named after it and after CUB's version), and
           reads CUB, Thrust and libcu++ from FATBINS/cccl, the headers of
           the nvcc that compiled the device halves, ahead of CUDA_PATH's
  registry UNITS OBJECTS CXX SRC [TARGET [SYSROOT]]
           prints the compile of ggml-backend-reg.cpp with GGML_USE_CUDA
  count    UNITS
"""

import json
import os
import shlex
import sys


def entries(config):
    with open(os.path.join(config, "compile_commands.json")) as f:
        return json.load(f)


def cuda_units(config):
    units = [e for e in entries(config) if e["file"].endswith(".cu") and "/ggml-cuda/" in e["file"]]
    if not units:
        sys.exit(f"{config}: no ggml-cuda units in compile_commands.json (was it configured with GGML_CUDA=ON?)")
    return sorted(units, key=lambda e: e["file"])


def words(entry):
    return entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])


def unit_name(entry):
    """A file name for the unit: its path below ggml-cuda/, flattened."""
    path = entry["file"].split("/ggml-cuda/", 1)[1]
    return path.replace("/", "__")[: -len(".cu")]


def without_output_and_deps(ws):
    """The command without its -o, -c and dependency-file options."""
    out, skip = [], 0
    for w in ws:
        if skip:
            skip -= 1
            continue
        if w in ("-o", "-MT", "-MF"):
            skip = 1
            continue
        if w in ("-c", "-MD", "-MMD"):
            continue
        out.append(w)
    return out


def device(config, fatbins):
    for e in cuda_units(config):
        ws = without_output_and_deps(words(e))
        src = e["file"]
        ws = [w for w in ws if w != src]
        fat = os.path.join(fatbins, unit_name(e) + ".fatbin")
        # nvcc's own flags, whole: the fat binary is what nvcc would have
        # embedded in the object.
        cmd = ws + ["--fatbin", "-o", fat, src]
        print(f"cd {shlex.quote(e['directory'])} && {shlex.join(cmd)}")


# nvcc options that take a value as the next word; none of them concerns
# the host half.
NVCC_VALUE_OPTIONS = {"-arch", "-code", "-gencode", "-ccbin", "--compiler-bindir", "-Xptxas",
                      "-Xnvlink", "-Xfatbinary", "-t", "--threads", "-maxrregcount",
                      "-compress-mode", "--compress-mode", "-x"}


def host_flags(ws):
    """The flags of an nvcc command that mean something to the host
    compiler: -D, -I, -isystem, -std, and -Xcompiler's."""
    out, i = [], 1  # word 0 is nvcc
    while i < len(ws):
        w = ws[i]
        if w in ("-I", "-D", "-isystem", "-include"):
            out += [w, ws[i + 1]]
            i += 2
            continue
        if w.startswith(("-I", "-D")) or w.startswith("-std="):
            out.append(w)
        elif w.startswith(("-Xcompiler=", "--compiler-options=")):
            out += compiler_options(w.split("=", 1)[1])
        elif w in ("-Xcompiler", "--compiler-options"):
            out += compiler_options(ws[i + 1])
            i += 1
        elif w in NVCC_VALUE_OPTIONS:
            i += 1
        elif w.startswith("-O"):
            out.append(w)
        i += 1
    return out


def compiler_options(value):
    """-Xcompiler's value: flags separated by commas (nvcc's way) or, as
    CMake quotes a list, by spaces."""
    return [f for part in value.split(",") for f in part.split() if f]


def target_flags(target, sysroot):
    flags = []
    if target:
        flags += ["-target", target]
    if sysroot:
        flags += ["-isysroot", sysroot]
    return flags


ROOT = "@LLAMA@"


def portable(flags, src):
    """Flags with the llama.cpp tree's prefix made a placeholder, and the
    CUDA toolkit's own include directories dropped (clang finds its
    headers through --cuda-path)."""
    src = os.path.realpath(src)
    out, i = [], 0
    while i < len(flags):
        f = flags[i]
        if f in ("-I", "-isystem") and i + 1 < len(flags):
            f, path, i = f, flags[i + 1], i + 2
        elif f.startswith("-I"):
            f, path, i = "-I", f[2:], i + 1
        else:
            out.append(f)
            i += 1
            continue
        real = os.path.realpath(path)
        if real == src or real.startswith(src + os.sep):
            out += [f, ROOT + real[len(src):]]
        # Anything else is the toolkit's or the system's.
    return out


def describe(config, src):
    units = []
    for e in cuda_units(config):
        rel = os.path.relpath(os.path.realpath(e["file"]), os.path.realpath(src))
        units.append({"name": unit_name(e), "source": rel,
                      "flags": portable(host_flags(words(e)), src)})
    reg = [e for e in entries(config) if e["file"].endswith("/ggml-backend-reg.cpp")]
    if len(reg) != 1:
        sys.exit(f"{config}: expected one ggml-backend-reg.cpp, found {len(reg)}")
    e = reg[0]
    ws = without_output_and_deps(words(e))
    if "-DGGML_USE_CUDA" not in ws:
        sys.exit(f"{config}: ggml-backend-reg.cpp is not built with GGML_USE_CUDA")
    registry = {"source": os.path.relpath(os.path.realpath(e["file"]), os.path.realpath(src)),
                "flags": portable([w for w in ws[1:] if w != e["file"]], src)}
    json.dump({"units": units, "registry": registry}, sys.stdout, indent=1)
    print()


def load(path):
    with open(path) as f:
        return json.load(f)


def placed(flags, src):
    src = os.path.realpath(src)
    return [f.replace(ROOT, src) for f in flags]


# How clang mangled before version 18 (see `host` in the usage above).
CLANG_ABI = "-fclang-abi-compat=17"


def device_match_flags(fatbins):
    """The flags that make a host half name its kernels as nvcc named the
    device half's: the mangling, the architecture list nvcc defined, and
    the device compiler's own CCCL headers (when the device phase kept
    them)."""
    flags = [CLANG_ABI]
    arch_list = os.path.join(fatbins, "arch-list")
    if os.path.exists(arch_list):
        with open(arch_list) as f:
            flags.append(f"-D__CUDA_ARCH_LIST__={f.read().strip()}")
    cccl = os.path.join(fatbins, "cccl")
    if os.path.isdir(cccl):
        flags += ["-isystem", os.path.realpath(cccl)]
    return flags


def host(units, fatbins, objects, clang, cuda_path, arch, src, target=None, sysroot=None):
    matching = device_match_flags(fatbins)
    for u in load(units)["units"]:
        fat = os.path.join(fatbins, u["name"] + ".fatbin")
        cmd = [clang, "-x", "cuda", "--cuda-host-only", "-nocudalib", f"--cuda-path={cuda_path}",
               f"--cuda-gpu-arch={arch}", "-Wno-unknown-cuda-version"]
        cmd += matching
        cmd += target_flags(target, sysroot)
        cmd += placed(u["flags"], src)
        cmd += ["-Xclang", "-fcuda-include-gpubinary", "-Xclang", fat,
                "-c", os.path.join(os.path.realpath(src), u["source"]),
                "-o", os.path.join(objects, u["name"] + ".o")]
        print(shlex.join(cmd))


def registry(units, objects, cxx, src, target=None, sysroot=None):
    r = load(units)["registry"]
    cmd = [cxx] + target_flags(target, sysroot) + placed(r["flags"], src)
    cmd += ["-c", os.path.join(os.path.realpath(src), r["source"]),
            "-o", os.path.join(objects, "ggml-backend-reg-cuda.o")]
    print(shlex.join(cmd))


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    what, args = argv[1], argv[2:]
    if what == "device" and len(args) == 2:
        device(*args)
    elif what == "describe" and len(args) == 2:
        describe(*args)
    elif what == "host" and 7 <= len(args) <= 9:
        host(*args)
    elif what == "registry" and 4 <= len(args) <= 6:
        registry(*args)
    elif what == "count" and len(args) == 1:
        print(len(load(args[0])["units"]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
