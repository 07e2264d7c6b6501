#!/usr/bin/env python3
"""Make a GGUF file's "shape twin": same metadata, tokenizer, tensor names, shapes and types, random weights.

Why: speed figures depend on shapes and tensor types, not on the weights' values. A machine that cannot receive
the real file (a GPU box with no network and a small upload limit) can rebuild a twin from the header alone and
be measured with `tandem bench speed -m TWIN.gguf --device cuda` (and llama-bench) at the real model's cost.
The twin's text is gibberish; never use it to judge quality.

    gguf-twin.py header MODEL.gguf HEADER.bin     # keep only the header (a few MB: metadata + tensor table)
    gguf-twin.py fill HEADER.bin TWIN.gguf        # rebuild a full-size file with random, valid blocks
    gguf-twin.py synth NAME HEADER.bin            # write the header of a model this machine has never seen, from
                                                  # its published shapes (NAME: see SHAPES below), at Q4_K_M

`synth` is for the model families' speed table (docs/performance.md): Llama-3.2-1B, Qwen3-1.7B and Phi-4-mini at
their real widths, layer counts, vocabulary sizes and llama.cpp's Q4_K_M tensor types, with a placeholder GPT-2
vocabulary of the real size (byte tokens, filler tokens, the family's control tokens by name).

Scales are written as small finite f16 values and norms near 1, so activations stay finite through every layer.
Needs numpy.
"""
import struct
import sys

import numpy as np

# ggml type id -> (block bytes, weights per block, byte offsets of f16 scale fields inside a block)
BLOCKS = {
    0: (4, 1, None),  # F32: written as floats, not bytes
    1: (2, 1, None),  # F16
    2: (18, 32, [0]),  # Q4_0
    3: (20, 32, [0, 2]),  # Q4_1
    6: (22, 32, [0]),  # Q5_0
    7: (24, 32, [0, 2]),  # Q5_1
    8: (34, 32, [0]),  # Q8_0
    10: (84, 256, [80, 82]),  # Q2_K
    11: (110, 256, [108]),  # Q3_K
    12: (144, 256, [0, 2]),  # Q4_K
    13: (176, 256, [0, 2]),  # Q5_K
    14: (210, 256, [208]),  # Q6_K
}
SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        values = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return values[0] if len(values) == 1 else values

    def string(self):
        length = self.take("Q")
        text = self.data[self.pos : self.pos + length].decode("utf-8", "replace")
        self.pos += length
        return text

    def value(self, kind):
        if kind == 8:
            return self.string()
        if kind == 9:
            item_kind, count = self.take("I"), self.take("Q")
            if item_kind in SCALAR_SIZES:  # skip arrays of numbers without decoding them
                self.pos += SCALAR_SIZES[item_kind] * count
                return None
            return [self.value(item_kind) for _ in range(count)]
        fmt = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}[kind]
        return self.take(fmt)


def parse(data):
    """Returns (tensors as (name, dims, type, offset), data start) of a GGUF file's leading bytes."""
    reader = Reader(data)
    if reader.take("4s") != b"GGUF":
        sys.exit("not a GGUF file (no GGUF magic)")
    version, tensor_count, kv_count = reader.take("I"), reader.take("Q"), reader.take("Q")
    if version not in (2, 3):
        sys.exit(f"GGUF version {version} is not supported (2 and 3 are)")
    alignment = 32
    for _ in range(kv_count):
        key, kind = reader.string(), reader.take("I")
        value = reader.value(kind)
        if key == "general.alignment":
            alignment = value
    tensors = []
    for _ in range(tensor_count):
        name = reader.string()
        dims = [reader.take("Q") for _ in range(reader.take("I"))]
        tensors.append((name, dims, reader.take("I"), reader.take("Q")))
    start = (reader.pos + alignment - 1) // alignment * alignment
    return tensors, start


def tensor_bytes(dims, kind):
    if kind not in BLOCKS:
        sys.exit(f"tensor type {kind} is not supported by this script")
    block_bytes, per_block, _ = BLOCKS[kind]
    count = int(np.prod(dims))
    return count // per_block * block_bytes


def random_tensor(rng, name, dims, kind):
    count = int(np.prod(dims))
    if kind == 0:
        # Norm weights and RoPE frequency divisors (rope_freqs, LongRoPE factors) sit near 1.
        centre = 1.0 if "norm" in name or "rope_" in name else 0.0
        return (centre + rng.uniform(-0.05, 0.05, count)).astype("<f4").tobytes()
    if kind == 1:
        return rng.uniform(-0.05, 0.05, count).astype("<f2").tobytes()
    block_bytes, per_block, scale_offsets = BLOCKS[kind]
    blocks = rng.integers(0, 256, size=(count // per_block, block_bytes), dtype=np.uint8)
    for offset in scale_offsets:
        scales = rng.uniform(0.0005, 0.002, len(blocks)).astype("<f2")
        blocks[:, offset : offset + 2] = scales.view(np.uint8).reshape(-1, 2)
    return blocks.tobytes()


# Published shapes (each model's config.json as convert_hf_to_gguf.py writes it into GGUF metadata).
SHAPES = {
    "llama-3.2-1b": dict(arch="llama", name="Llama-3.2-1B-Instruct (shape twin)", layers=16, hidden=2048, ffn=8192,
                         heads=32, kv_heads=8, head_dim=64, vocab=128256, context=131072, rope_base=500000.0,
                         eps=1e-5, pre="llama-bpe", tied=True, rope_freqs=True,
                         specials={128000: "<|begin_of_text|>", 128001: "<|end_of_text|>",
                                   128006: "<|start_header_id|>", 128007: "<|end_header_id|>", 128009: "<|eot_id|>"},
                         bos=128000, eos=128009),
    "qwen3-1.7b": dict(arch="qwen3", name="Qwen3-1.7B (shape twin)", layers=28, hidden=2048, ffn=6144, heads=16,
                       kv_heads=8, head_dim=128, vocab=151936, context=40960, rope_base=1000000.0, eps=1e-6,
                       pre="qwen2", tied=True, qk_norm=True,
                       specials={151643: "<|endoftext|>", 151644: "<|im_start|>", 151645: "<|im_end|>"},
                       bos=151643, eos=151645),
    "phi-4-mini": dict(arch="phi3", name="Phi-4-mini-instruct (shape twin)", layers=32, hidden=3072, ffn=8192,
                       heads=24, kv_heads=8, head_dim=128, rope_dims=96, vocab=200064, context=131072,
                       original_context=4096, rope_base=10000.0, eps=1e-5, pre="gpt-4o", tied=True, fused=True,
                       specials={199999: "<|endoftext|>", 200018: "<|endofprompt|>", 200019: "<|assistant|>",
                                 200020: "<|end|>", 200021: "<|user|>", 200022: "<|system|>"},
                       bos=199999, eos=200020),
}
Q4_K, Q5_K, Q6_K, F32 = 12, 13, 14, 0


def more_bits(i, n):
    """llama.cpp's use_more_bits: the layers Q4_K_M gives Q6_K for attn_v and ffn_down."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def synth_tensors(m):
    """(name, ggml dims: row length first, type) in llama.cpp's Q4_K_M choice of types."""
    h, n, hd = m["hidden"], m["layers"], m["head_dim"]
    q, kv = m["heads"] * hd, m["kv_heads"] * hd
    # A tied model's embedding is quantized as the output (Q6_K); an untied one's as the rest.
    out = [("token_embd.weight", [h, m["vocab"]], Q6_K if m["tied"] else Q4_K), ("output_norm.weight", [h], F32)]
    if not m["tied"]:
        out.append(("output.weight", [h, m["vocab"]], Q6_K))
    rot = m.get("rope_dims", hd)
    if m.get("rope_freqs"):
        out.append(("rope_freqs.weight", [rot // 2], F32))
    if m.get("original_context"):
        out += [("rope_factors_long.weight", [rot // 2], F32), ("rope_factors_short.weight", [rot // 2], F32)]
    for i in range(n):
        b = f"blk.{i}."
        out += [(b + "attn_norm.weight", [h], F32), (b + "ffn_norm.weight", [h], F32)]
        if m.get("fused"):
            out += [(b + "attn_qkv.weight", [h, q + 2 * kv], Q5_K), (b + "ffn_up.weight", [h, 2 * m["ffn"]], Q4_K)]
        else:
            out += [(b + "attn_q.weight", [h, q], Q4_K), (b + "attn_k.weight", [h, kv], Q4_K),
                    (b + "attn_v.weight", [h, kv], Q6_K if more_bits(i, n) else Q4_K),
                    (b + "ffn_gate.weight", [h, m["ffn"]], Q4_K), (b + "ffn_up.weight", [h, m["ffn"]], Q4_K)]
        if m.get("qk_norm"):
            out += [(b + "attn_q_norm.weight", [hd], F32), (b + "attn_k_norm.weight", [hd], F32)]
        out += [(b + "attn_output.weight", [q, h], Q4_K),
                (b + "ffn_down.weight", [m["ffn"], h], Q6_K if more_bits(i, n) else Q4_K)]
    return out


class Writer:
    def __init__(self):
        self.parts = []

    def raw(self, fmt, *values):
        self.parts.append(struct.pack("<" + fmt, *values))

    def string(self, text):
        data = text.encode("utf-8")
        self.raw("Q", len(data))
        self.parts.append(data)

    def kv(self, key, value):
        self.string(key)
        if isinstance(value, bool):
            self.raw("IB", 7, value)
        elif isinstance(value, str):
            self.raw("I", 8)
            self.string(value)
        elif isinstance(value, float):
            self.raw("If", 6, value)
        elif isinstance(value, int):
            self.raw("II", 4, value)
        elif isinstance(value, list) and value and isinstance(value[0], str):
            self.raw("IIQ", 9, 8, len(value))
            for item in value:
                self.string(item)
        elif isinstance(value, list):
            self.raw("IIQ", 9, 5, len(value))
            self.parts.append(struct.pack(f"<{len(value)}i", *value))
        else:
            raise TypeError(key)

    def bytes(self):
        return b"".join(self.parts)


def gpt2_byte_chars():
    """GPT-2's printable stand-ins for the 256 bytes (the byte tokens of every GPT-2 BPE vocabulary)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def synth(name, target):
    if name not in SHAPES:
        sys.exit(f"unknown shape {name}: one of {', '.join(SHAPES)}")
    m, a = SHAPES[name], SHAPES[name]["arch"]
    tokens = gpt2_byte_chars()
    types = [1] * 256
    space = tokens[ord(" ")]
    tokens.append(space + "t")
    types.append(1)
    while len(tokens) < m["vocab"]:
        tokens.append(f"<filler_{len(tokens)}>")
        types.append(1)
    for index, text in m["specials"].items():
        tokens[index], types[index] = text, 3
    meta = {
        "general.architecture": a, "general.name": m["name"], "general.file_type": 15, "general.alignment": 32,
        f"{a}.block_count": m["layers"], f"{a}.context_length": m["context"], f"{a}.embedding_length": m["hidden"],
        f"{a}.feed_forward_length": m["ffn"], f"{a}.attention.head_count": m["heads"],
        f"{a}.attention.head_count_kv": m["kv_heads"], f"{a}.attention.layer_norm_rms_epsilon": m["eps"],
        f"{a}.rope.freq_base": m["rope_base"], f"{a}.attention.key_length": m["head_dim"],
        f"{a}.attention.value_length": m["head_dim"], f"{a}.rope.dimension_count": m.get("rope_dims", m["head_dim"]),
        f"{a}.vocab_size": m["vocab"],
        "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": m["pre"], "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": types, "tokenizer.ggml.merges": [f"{space} t"],
        "tokenizer.ggml.bos_token_id": m["bos"], "tokenizer.ggml.eos_token_id": m["eos"],
    }
    if m.get("original_context"):
        meta[f"{a}.rope.scaling.original_context_length"] = m["original_context"]
        meta[f"{a}.rope.scaling.attn_factor"] = 1.190238
        meta[f"{a}.attention.sliding_window"] = 262144
    tensors = synth_tensors(m)
    w = Writer()
    w.raw("4sIQQ", b"GGUF", 3, len(tensors), len(meta))
    for key, value in meta.items():
        w.kv(key, value)
    offset = 0
    for tname, dims, kind in tensors:
        w.string(tname)
        w.raw("I", len(dims))
        for d in dims:
            w.raw("Q", d)
        w.raw("IQ", kind, offset)
        offset += (tensor_bytes(dims, kind) + 31) // 32 * 32
    head = w.bytes()
    head += b"\0" * ((-len(head)) % 32)
    with open(target, "wb") as out:
        out.write(head)
    params = sum(int(np.prod(d)) for _, d, _ in tensors)
    print(f"{target}: header of {name} ({params / 1e9:.2f} B weights, {offset / 2**20:.0f} MiB of data)")


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("header", "fill", "synth"):
        sys.exit(__doc__)
    verb, source, target = sys.argv[1:]
    if verb == "synth":
        synth(source, target)
        return
    with open(source, "rb") as f:
        head = f.read(64 << 20)
    tensors, start = parse(head)
    if verb == "header":
        with open(target, "wb") as out:
            out.write(head[:start])
        print(f"{target}: {start} header bytes, {len(tensors)} tensors")
        return
    rng = np.random.default_rng(0)
    with open(target, "wb") as out:
        out.write(head[:start])
        for name, dims, kind, offset in sorted(tensors, key=lambda t: t[3]):
            out.seek(start + offset)
            data = random_tensor(rng, name, dims, kind)
            assert len(data) == tensor_bytes(dims, kind), name
            out.write(data)
        size = out.tell()
    print(f"{target}: {size} bytes, {len(tensors)} tensors with random weights")


if __name__ == "__main__":
    main()
