#!/usr/bin/env python3
"""Writes the GGUF fixtures of crates/hw/tests/gguf.rs with gguf-py's writer, and
gguf-py's reading of each (GGUFReader) as JSON next to it.

    ~/.cache/tokenscope/llama/venv/bin/python scripts/gguf-fixture.py

Needs the `gguf` and `numpy` packages. The output is deterministic (seeded).
"""
import importlib.metadata
import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T, GGUFValueType as V

OUT = os.path.join(os.path.dirname(__file__), "..", "core", "tests", "fixtures", "gguf")
rng = np.random.default_rng(16)


def tensor(w: gguf.GGUFWriter, name: str, qtype: T, rows: int, cols: int) -> None:
    """Adds a rows x cols tensor (ggml dims [cols, rows]) quantised to qtype."""
    data = rng.standard_normal((rows, cols)).astype(np.float32)
    if qtype == T.F32:
        w.add_tensor(name, data if rows > 1 else data[0])
    elif qtype == T.F16:
        w.add_tensor(name, data.astype(np.float16))
    else:
        try:
            q = gguf.quants.quantize(data, qtype)
        except NotImplementedError:
            block, size = gguf.GGML_QUANT_SIZES[qtype]
            q = rng.integers(0, 256, (rows, cols // block * size), dtype=np.uint8)
        w.add_tensor(name, q, raw_dtype=qtype)


def tiny(path: str) -> None:
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("tiny")
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 1.5)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "héllo gguf")
    w.add_uint64("test.u64", 2**63 + 5)
    w.add_int64("test.i64", -(2**62))
    w.add_float64("test.f64", -0.125)
    w.add_array("test.array_i32", [1, -2, 3])
    w.add_key_value("test.array_u8", [1, 2, 255], V.ARRAY, sub_type=V.UINT8)
    w.add_array("test.nested", [[1, 2], [3, 4, 5]])
    w.add_array("test.strings", ["a", "bc"])
    # Longer than the reader keeps (64 strings): only its type and length stay.
    w.add_array("test.long_strings", [f"s{i}" for i in range(100)])
    w.add_block_count(2)
    w.add_context_length(128)
    w.add_embedding_length(32)
    w.add_feed_forward_length(64)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_token_list([f"t{i}" for i in range(72)])
    tensor(w, "token_embd.weight", T.Q4_0, 72, 32)
    tensor(w, "output_norm.weight", T.F32, 1, 32)
    tensor(w, "blk.0.attn_q.weight", T.Q4_K, 2, 256)
    tensor(w, "blk.0.attn_k.weight", T.F16, 2, 32)
    tensor(w, "blk.0.attn_v.weight", T.BF16, 2, 32)
    tensor(w, "blk.0.attn_output.weight", T.Q8_0, 3, 64)
    tensor(w, "blk.0.ffn_down.weight", T.Q6_K, 1, 256)
    tensor(w, "blk.1.attn_norm.weight", T.F32, 1, 32)
    tensor(w, "blk.1.ffn_up.weight", T.Q5_0, 2, 32)
    tensor(w, "blk.1.ffn_gate.weight", T.IQ4_NL, 1, 64)
    finish(w)


def aligned(path: str) -> None:
    """Non-default alignment, untied output, per-layer KV heads, a sliding pattern."""
    w = gguf.GGUFWriter(path, "gemma3")
    w.add_custom_alignment(64)
    w.add_name("aligned")
    w.add_block_count(4)
    w.add_context_length(1024)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_head_count(2)
    w.add_key_value("gemma3.attention.head_count_kv", [1, 1, 2, 1], V.ARRAY, sub_type=V.UINT32)
    w.add_key_length(32)
    w.add_value_length(32)
    w.add_sliding_window(16)
    w.add_sliding_window_pattern(2)
    tensor(w, "token_embd.weight", T.Q8_0, 10, 64)
    tensor(w, "output.weight", T.Q8_0, 10, 64)
    tensor(w, "blk.0.attn_norm.weight", T.F32, 1, 64)
    tensor(w, "blk.0.ffn_down.weight", T.Q4_0, 3, 128)
    finish(w)


def finish(w: gguf.GGUFWriter) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def dump(path: str) -> None:
    """gguf-py's reading of `path`, as JSON."""
    r = gguf.GGUFReader(path)
    fields = []
    for key, f in r.fields.items():
        if key.startswith("GGUF."):
            continue
        entry = {"key": key, "types": [int(t) for t in f.types]}
        if f.types[0] == V.ARRAY:
            entry["len"] = len(f.data)
            if len(f.types) == 2:  # gguf-py reads flat arrays only
                entry["value"] = [x if isinstance(x, (str, bool)) else int(x) if float(x).is_integer() else float(x) for x in f.contents()]
        else:
            v = f.contents()
            entry["value"] = v if isinstance(v, (str, bool)) else float(v) if f.types[0] in (V.FLOAT32, V.FLOAT64) else int(v)
        fields.append(entry)
    tensors = [
        {
            "name": t.name,
            "type": int(t.tensor_type),
            "dims": [int(d) for d in t.shape],
            "data_offset": int(t.data_offset),
            "n_bytes": int(t.n_bytes),
        }
        for t in r.tensors
    ]
    out = {
        "gguf_version": importlib.metadata.version("gguf"),
        "version": int(r.fields["GGUF.version"].parts[-1][0]),
        "alignment": int(r.alignment),
        "data_offset": int(r.data_offset),
        "file_len": os.path.getsize(path),
        "fields": fields,
        "tensors": tensors,
        "quant_sizes": {str(int(k)): list(v) for k, v in gguf.GGML_QUANT_SIZES.items()},
        "type_names": {str(int(k)): k.name for k in gguf.GGML_QUANT_SIZES},
    }
    with open(path.removesuffix(".gguf") + ".json", "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    for name, build in [("tiny", tiny), ("aligned64", aligned)]:
        path = os.path.join(OUT, name + ".gguf")
        build(path)
        dump(path)
        print(path, os.path.getsize(path), "bytes", file=sys.stderr)
