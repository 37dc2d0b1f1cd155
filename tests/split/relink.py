#!/usr/bin/env python3
"""A program's link line, as llama.cpp's CPU-only CMake build generated it
(the last command `ninja -t commands PROGRAM` prints), replayed with ours:
the output renamed, and the CUDA backend's registry object, the ggml-cuda
archive and our static libraries inserted ahead of ggml's own archives,
our libraries' system needs appended.

  relink.py LINE PROGRAM OUTPUT "OURS..." "SYSTEM_LIBS..."   (prints the line)
"""
import shlex, sys
line, program, output, ours, system = sys.argv[1:]
# Ninja's line is `: && LINK && :`; the link is the part that writes -o.
parts = [p for p in line.split(" && ") if " -o " in p]
if len(parts) != 1:
    sys.exit(f"{program}: no single link command in: {line}")
words = shlex.split(parts[0])
i = words.index("-o")
if not words[i + 1].endswith(program):
    sys.exit(f"{program}: its link line writes {words[i + 1]}")
words[i + 1] = output
# Ours go ahead of the first of ggml's own archives: the registry object
# must come before libggml.a (whose registry, without CUDA, it replaces)
# and ggml-cuda before the CPU backend and ggml-base, which it calls.
ggml = [i for i, w in enumerate(words) if w.rsplit("/", 1)[-1].startswith("libggml") and w.endswith(".a")]
if not ggml or not any(words[i].endswith("libggml-cpu.a") for i in ggml):
    sys.exit(f"{program}: no libggml archives (CPU backend) in its link line: {line}")
at = ggml[0]
words = words[:at] + ours.split() + words[at:] + system.split()
print(shlex.join(words))
