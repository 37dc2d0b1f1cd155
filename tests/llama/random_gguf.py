#!/usr/bin/env python3
"""Writes a llama-architecture GGUF model with seeded random weights and a
real vocabulary, so llama.cpp has a model to load and decode with no hub:
greedy text from random weights is gibberish, but it is deterministic, so
two stacks decoding the same file can be compared byte for byte.

  random_gguf.py OUT.gguf --shape 1b|8b|moe|tiny|tiny-moe --type q4_0|f16
                 --vocab ggml-vocab-llama-spm.gguf [--seed N]

Uses gguf-py from llama.cpp's own source (tests/llama/source.sh puts it
beside the rest; pass its directory with --gguf-py or on PYTHONPATH) and
numpy. The header goes out first and the tensors one at a time, so an
8B-shaped model needs one tensor's memory, not the model's.

Shapes: 1b is TinyLlama-1.1B's (2048 wide, 22 layers, grouped-query
attention 32/4 heads, 5632 feed-forward); 8b is Llama-3-8B's (4096, 32
layers, 32/8 heads, 14336); moe is a Mixtral-like mixture of experts at
a small scale (2048 wide, 8 layers, 16/4 heads, 8 experts of 2048, two
used per token: the MUL_MAT_ID path); tiny and tiny-moe are the same
forms at toy sizes, for trying the scripts without a GPU.

Weights: Q4_0 blocks have random 4-bit values (1..15, so zero mean) and
a scale drawn near gain / sqrt(fan_in) / 4.3 (their spread), F16 weights are
normal with that deviation; norms are ones. Every tensor's numbers come
from its own generator, seeded by (seed, tensor index), so a file is the
same wherever and in whatever order it is written.
"""

import argparse
import os
import sys
import types
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Shape:
    width: int
    layers: int
    heads: int
    kv_heads: int
    ff: int
    context: int
    experts: int = 0
    experts_used: int = 0


SHAPES = {
    "1b": Shape(width=2048, layers=22, heads=32, kv_heads=4, ff=5632, context=2048),
    "8b": Shape(width=4096, layers=32, heads=32, kv_heads=8, ff=14336, context=4096),
    "moe": Shape(width=2048, layers=8, heads=16, kv_heads=4, ff=2048, context=2048, experts=8, experts_used=2),
    "tiny": Shape(width=256, layers=2, heads=4, kv_heads=2, ff=512, context=512),
    "tiny-moe": Shape(width=256, layers=2, heads=4, kv_heads=2, ff=256, context=512, experts=4, experts_used=2),
}

# Q4_0: blocks of 32 weights, an f16 scale then 16 bytes of 4-bit values.
Q4_0_BLOCK = 32
Q4_0_BYTES = 18
# The standard deviation of (q - 8) for q uniform on 1..15.
Q4_0_SPREAD = 4.32
# Rows are generated this many at a time, to bound memory.
ROWS_PER_PIECE = 4096


@dataclass
class Tensor:
    name: str
    # ggml's order: ne0 (the contiguous dimension) first.
    ne: tuple
    kind: str  # "weight" (quantizable), "norm" (f32 ones), "router" (f32 normal)
    fan_in: int


def tensors(s: Shape, vocab: int) -> list:
    head_dim = s.width // s.heads
    kv_width = head_dim * s.kv_heads
    out = [Tensor("token_embd.weight", (s.width, vocab), "weight", s.width)]
    for i in range(s.layers):
        b = f"blk.{i}."
        out += [
            Tensor(b + "attn_norm.weight", (s.width,), "norm", 1),
            Tensor(b + "attn_q.weight", (s.width, s.width), "weight", s.width),
            Tensor(b + "attn_k.weight", (s.width, kv_width), "weight", s.width),
            Tensor(b + "attn_v.weight", (s.width, kv_width), "weight", s.width),
            Tensor(b + "attn_output.weight", (s.width, s.width), "weight", s.width),
            Tensor(b + "ffn_norm.weight", (s.width,), "norm", 1),
        ]
        if s.experts:
            out += [
                Tensor(b + "ffn_gate_inp.weight", (s.width, s.experts), "router", s.width),
                Tensor(b + "ffn_gate_exps.weight", (s.width, s.ff, s.experts), "weight", s.width),
                Tensor(b + "ffn_up_exps.weight", (s.width, s.ff, s.experts), "weight", s.width),
                Tensor(b + "ffn_down_exps.weight", (s.ff, s.width, s.experts), "weight", s.ff),
            ]
        else:
            out += [
                Tensor(b + "ffn_gate.weight", (s.width, s.ff), "weight", s.width),
                Tensor(b + "ffn_up.weight", (s.width, s.ff), "weight", s.width),
                Tensor(b + "ffn_down.weight", (s.ff, s.width), "weight", s.ff),
            ]
    out += [
        Tensor("output_norm.weight", (s.width,), "norm", 1),
        Tensor("output.weight", (s.width, vocab), "weight", s.width),
    ]
    return out


def rows_of(t: Tensor) -> int:
    return int(np.prod(t.ne[1:])) if len(t.ne) > 1 else 1


def storage(t: Tensor, q4: bool):
    """(numpy dtype, numpy-order shape as stored, ggml type or None)."""
    from gguf import GGMLQuantizationType

    if t.kind != "weight":
        return np.float32, tuple(reversed(t.ne)), None
    if q4:
        if t.ne[0] % Q4_0_BLOCK:
            raise SystemExit(f"{t.name}: {t.ne[0]} is not a whole number of Q4_0 blocks")
        byte_shape = tuple(reversed(t.ne[1:])) + (t.ne[0] // Q4_0_BLOCK * Q4_0_BYTES,)
        return np.uint8, byte_shape, GGMLQuantizationType.Q4_0
    return np.float16, tuple(reversed(t.ne)), None


def pieces(t: Tensor, q4: bool, rng: np.random.Generator, gain: float):
    """The tensor's bytes, a run of rows at a time, in file order."""
    rows = rows_of(t)
    width = t.ne[0]
    deviation = gain / np.sqrt(t.fan_in)
    for start in range(0, rows, ROWS_PER_PIECE):
        n = min(ROWS_PER_PIECE, rows - start)
        if t.kind == "norm":
            yield np.ones(width, dtype=np.float32)
        elif t.kind == "router":
            yield (rng.standard_normal((n, width)) * deviation).astype(np.float32)
        elif q4:
            blocks = n * width // Q4_0_BLOCK
            # 4-bit values 1..15 (weights -7..7 scales): zero mean. With
            # 0..15 every weight shares a -0.5 scale offset, and the models
            # repeat one token for ever.
            nibbles = rng.integers(1, 16, size=(blocks, Q4_0_BYTES, 2), dtype=np.uint8)
            raw = nibbles[..., 0] | (nibbles[..., 1] << 4)
            scale = deviation / Q4_0_SPREAD * rng.uniform(0.75, 1.25, size=blocks)
            raw[:, :2] = scale.astype(np.float16).view(np.uint8).reshape(blocks, 2)
            yield raw
        else:
            yield (rng.standard_normal((n, width)) * deviation).astype(np.float16)


def copy_vocabulary(writer, vocab_path: str) -> int:
    """Every tokenizer.* key of a llama.cpp vocabulary file; its size."""
    from gguf import GGUFReader, GGUFValueType

    reader = GGUFReader(vocab_path)
    size = None
    for field in reader.fields.values():
        if not field.name.startswith("tokenizer."):
            continue
        main = field.types[0]
        sub = field.types[-1] if main == GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), main, sub_type=sub)
        if field.name == "tokenizer.ggml.tokens":
            size = len(field.data)
    if not size:
        raise SystemExit(f"{vocab_path}: no tokenizer.ggml.tokens")
    return size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--shape", choices=sorted(SHAPES), required=True)
    ap.add_argument("--type", choices=["q4_0", "f16"], required=True)
    ap.add_argument("--vocab", required=True, help="a llama.cpp models/ggml-vocab-*.gguf")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--gain", type=float, default=1.0, help="weights' deviation times sqrt(fan_in)")
    ap.add_argument("--gguf-py", help="llama.cpp's gguf-py directory")
    args = ap.parse_args()
    if args.gguf_py:
        sys.path.insert(0, args.gguf_py)
    try:
        import yaml  # noqa: F401
    except ImportError:
        # gguf-py's package imports yaml for reading model cards, which
        # nothing here does; the GPU machine's Python may lack it and has
        # no network to get it.
        sys.modules["yaml"] = types.ModuleType("yaml")
    import gguf

    shape = SHAPES[args.shape]
    q4 = args.type == "q4_0"
    arch = "llama"
    writer = gguf.GGUFWriter(args.out, arch)
    writer.add_name(f"macuda random {args.shape} {args.type} seed {args.seed}")
    vocab = copy_vocabulary(writer, args.vocab)
    writer.add_vocab_size(vocab)
    writer.add_context_length(shape.context)
    writer.add_embedding_length(shape.width)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.ff)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_rope_dimension_count(shape.width // shape.heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0 if q4 else gguf.LlamaFileType.MOSTLY_F16)
    if shape.experts:
        writer.add_expert_count(shape.experts)
        writer.add_expert_used_count(shape.experts_used)

    ts = tensors(shape, vocab)
    for t in ts:
        dtype, stored, ggml_type = storage(t, q4)
        nbytes = int(np.prod(stored)) * np.dtype(dtype).itemsize
        writer.add_tensor_info(t.name, stored, np.dtype(dtype), nbytes, raw_dtype=ggml_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    total = 0
    for index, t in enumerate(ts):
        dtype, stored, _ = storage(t, q4)
        rng = np.random.default_rng([args.seed, index])
        data = np.concatenate([p.reshape(-1) for p in pieces(t, q4, rng, args.gain)]).reshape(stored)
        writer.write_tensor_data(data)
        total += data.nbytes
    writer.close()
    params = sum(int(np.prod(t.ne)) for t in ts)
    print(f"{args.out}: {args.shape} {args.type}, {params / 1e9:.2f}B parameters, {total / 2**30:.2f} GiB, "
          f"vocabulary {vocab} from {os.path.basename(args.vocab)}, seed {args.seed}")


if __name__ == "__main__":
    main()
