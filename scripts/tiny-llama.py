#!/usr/bin/env python3
"""Write a tiny random-weight llama model as a GGUF file that llama.cpp serves.

The tokenizer is copied from one of llama.cpp's tokenizer-only GGUFs (for example
vendor/llama.cpp/models/ggml-vocab-llama-spm.gguf in the llama-cpp-python sdist);
the weights are random (seeded), so the text is nonsense, but the server does the
real work of a llama model: prefill cost grows with the prompt, each decode step
runs every layer, the KV cache fills. With the defaults (4 layers, 256 wide) a
decode step takes a few ms on one CPU core, so tests run fast.

    python3 scripts/tiny-llama.py --vocab ggml-vocab-llama-spm.gguf --out tiny.gguf \
        [--layers 4] [--dim 256] [--heads 4] [--kv-heads 4] [--ffn 768] [--ctx 4096] [--seed 1]

Needs the `gguf` and `numpy` packages (PyPI).
"""

import argparse
import sys

try:
    import numpy as np
    import gguf
except ImportError as e:  # pragma: no cover
    sys.exit(f"tiny-llama.py: {e}: pip install gguf numpy")


def copy_tokenizer(reader, writer):
    """Copy every tokenizer.* key (tokens, scores, types, special ids) as it is."""
    n_vocab = None
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        value = field.contents()
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[-1]
            writer.add_key_value(key, value, vtype, sub_type=sub)
            if key == "tokenizer.ggml.tokens":
                n_vocab = len(value)
        else:
            writer.add_key_value(key, value, vtype)
    if not n_vocab:
        sys.exit("tiny-llama.py: the vocab file has no tokenizer.ggml.tokens")
    return n_vocab


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vocab", required=True, help="a tokenizer-only GGUF (ggml-vocab-*.gguf)")
    p.add_argument("--out", required=True, help="where to write the model")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=768)
    p.add_argument("--ctx", type=int, default=4096, help="training context (llama-server's default -c)")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if a.dim % a.heads or a.heads % a.kv_heads:
        sys.exit("tiny-llama.py: --dim must divide by --heads, and --heads by --kv-heads")

    reader = gguf.GGUFReader(a.vocab)
    arch = "llama"
    w = gguf.GGUFWriter(a.out, arch)
    n_vocab = copy_tokenizer(reader, w)
    head_dim = a.dim // a.heads
    w.add_name(f"tiny-llama-{a.layers}x{a.dim}-random")
    w.add_context_length(a.ctx)
    w.add_embedding_length(a.dim)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(a.ffn)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

    rng = np.random.default_rng(a.seed)

    def mat(rows, cols):
        # numpy (rows, cols) = ggml ne [cols, rows]: `rows` outputs from `cols` inputs.
        return (rng.standard_normal((rows, cols), dtype=np.float32) * (1.0 / np.sqrt(cols))).astype(np.float16)

    def ones(n):
        return np.ones(n, dtype=np.float32)

    kv_dim = head_dim * a.kv_heads
    w.add_tensor("token_embd.weight", mat(n_vocab, a.dim))
    for i in range(a.layers):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", ones(a.dim))
        w.add_tensor(b + "attn_q.weight", mat(a.dim, a.dim))
        w.add_tensor(b + "attn_k.weight", mat(kv_dim, a.dim))
        w.add_tensor(b + "attn_v.weight", mat(kv_dim, a.dim))
        w.add_tensor(b + "attn_output.weight", mat(a.dim, a.dim))
        w.add_tensor(b + "ffn_norm.weight", ones(a.dim))
        w.add_tensor(b + "ffn_gate.weight", mat(a.ffn, a.dim))
        w.add_tensor(b + "ffn_up.weight", mat(a.ffn, a.dim))
        w.add_tensor(b + "ffn_down.weight", mat(a.dim, a.ffn))
    w.add_tensor("output_norm.weight", ones(a.dim))
    w.add_tensor("output.weight", mat(n_vocab, a.dim))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"tiny-llama.py: wrote {a.out}: {a.layers} layers x {a.dim}, vocab {n_vocab}", file=sys.stderr)


if __name__ == "__main__":
    main()
