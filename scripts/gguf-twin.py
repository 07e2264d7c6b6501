#!/usr/bin/env python3
"""Make a GGUF file's "shape twin": same metadata, tokenizer, tensor names, shapes and types, random weights.

Why: speed figures depend on shapes and tensor types, not on the weights' values. A machine that cannot receive
the real file (a GPU box with no network and a small upload limit) can rebuild a twin from the header alone and
be measured with `tandem bench speed -m TWIN.gguf --device cuda` (and llama-bench) at the real model's cost.
The twin's text is gibberish; never use it to judge quality.

    gguf-twin.py header MODEL.gguf HEADER.bin     # keep only the header (a few MB: metadata + tensor table)
    gguf-twin.py fill HEADER.bin TWIN.gguf        # rebuild a full-size file with random, valid blocks

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
        centre = 1.0 if "norm" in name else 0.0
        return (centre + rng.uniform(-0.05, 0.05, count)).astype("<f4").tobytes()
    if kind == 1:
        return rng.uniform(-0.05, 0.05, count).astype("<f2").tobytes()
    block_bytes, per_block, scale_offsets = BLOCKS[kind]
    blocks = rng.integers(0, 256, size=(count // per_block, block_bytes), dtype=np.uint8)
    for offset in scale_offsets:
        scales = rng.uniform(0.0005, 0.002, len(blocks)).astype("<f2")
        blocks[:, offset : offset + 2] = scales.view(np.uint8).reshape(-1, 2)
    return blocks.tobytes()


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("header", "fill"):
        sys.exit(__doc__)
    verb, source, target = sys.argv[1:]
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
