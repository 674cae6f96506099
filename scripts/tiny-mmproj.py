#!/usr/bin/env python3
"""Write a tiny random-weight vision projector ("mmproj") GGUF that llama.cpp's mtmd loads.

Paired with the tiny random-weight text model (scripts/tiny-llama.py) it gives a
llama-server that accepts images (`llama-server -m tiny.gguf --mmproj mmproj.gguf`),
so the tests can compare the benchmark's image-token figures with what a real
engine counts, without downloading a real vision model. The weights are random
(seeded), so the "description" of the image is nonsense, but the server does the
real work: it decodes the image, resizes it, runs the ViT and the projector, and
puts the image's embeddings into the prompt, where they count in prompt_tokens.

The projector is llava's two-layer MLP (clip.projector_type "mlp"), the simplest
one llama.cpp has: a CLIP-style ViT (patch conv, learned positions, pre-norm
blocks) whose patch features go through mm.0 -> GELU -> mm.2 into the text
model's embedding width. Without image_grid_pinpoints the image is resized (and
padded) to one square of --image-size, so every image costs the same number of
tokens, (image_size / patch_size)^2: 256 with the defaults. llava takes the
features of the second-to-last block, so --layers must be at least 2 (the last
block's weights are loaded but not run, as in real llava models).

    python3 scripts/tiny-mmproj.py --text-model tiny.gguf --out tiny-mmproj.gguf \
        [--image-size 224] [--patch 14] [--layers 2] [--dim 128] [--heads 4] [--ffn 512] \
        [--proj-hidden 256] [--seed 1]

Needs the `gguf` and `numpy` packages (PyPI).
"""

import argparse
import sys

try:
    import numpy as np
    import gguf
except ImportError as e:  # pragma: no cover
    sys.exit(f"tiny-mmproj.py: {e}: pip install gguf numpy")


def text_embedding_length(path):
    """The text model's embedding width: the projector's output must match it."""
    reader = gguf.GGUFReader(path)
    arch = reader.fields["general.architecture"].contents()
    field = reader.fields.get(f"{arch}.embedding_length")
    if field is None:
        sys.exit(f"tiny-mmproj.py: {path} has no {arch}.embedding_length")
    return int(field.contents())


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--text-model", required=True, help="the text model GGUF (for its embedding width)")
    p.add_argument("--out", required=True, help="where to write the projector")
    p.add_argument("--image-size", type=int, default=224, help="images are resized to this square")
    p.add_argument("--patch", type=int, default=14, help="ViT patch size; tokens per image = (image-size/patch)^2")
    p.add_argument("--layers", type=int, default=2, help="ViT blocks (at least 2: llava uses the second-to-last)")
    p.add_argument("--dim", type=int, default=128, help="ViT width")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=512, help="ViT feed-forward width (must differ from --dim)")
    p.add_argument("--proj-hidden", type=int, default=256, help="the MLP projector's hidden width")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if a.image_size % a.patch:
        sys.exit("tiny-mmproj.py: --image-size must divide by --patch")
    if a.dim % a.heads:
        sys.exit("tiny-mmproj.py: --dim must divide by --heads")
    if a.layers < 2:
        sys.exit("tiny-mmproj.py: --layers must be at least 2 (llava runs all blocks but the last)")
    if a.ffn == a.dim:
        # clip.cpp swaps ffn up/down of llava models whose ffn_down has n_embd inputs
        # (a fix for old conversions); with equal widths it cannot tell, so avoid it.
        sys.exit("tiny-mmproj.py: --ffn must differ from --dim")

    n_text = text_embedding_length(a.text_model)
    n_pos = (a.image_size // a.patch) ** 2

    w = gguf.GGUFWriter(a.out, "clip")
    w.add_name(f"tiny-mmproj-{a.layers}x{a.dim}-{a.image_size}px-random")
    w.add_description("random-weight llava-style vision projector for tests")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_bool("clip.has_vision_encoder", True)
    w.add_bool("clip.has_audio_encoder", False)
    w.add_string("clip.projector_type", "mlp")
    w.add_bool("clip.use_gelu", True)
    w.add_uint32("clip.vision.image_size", a.image_size)
    w.add_uint32("clip.vision.patch_size", a.patch)
    w.add_uint32("clip.vision.embedding_length", a.dim)
    w.add_uint32("clip.vision.feed_forward_length", a.ffn)
    w.add_uint32("clip.vision.block_count", a.layers)
    w.add_uint32("clip.vision.projection_dim", n_text)
    w.add_uint32("clip.vision.attention.head_count", a.heads)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-5)
    # OpenAI CLIP's normalisation, as llava's mmproj files carry it.
    w.add_array("clip.vision.image_mean", [0.48145466, 0.4578275, 0.40821073])
    w.add_array("clip.vision.image_std", [0.26862954, 0.26130258, 0.27577711])

    rng = np.random.default_rng(a.seed)

    def mat(rows, cols):
        # numpy (rows, cols) = ggml ne [cols, rows]: `rows` outputs from `cols` inputs.
        return (rng.standard_normal((rows, cols), dtype=np.float32) * (1.0 / np.sqrt(cols))).astype(np.float16)

    def ones(n):
        return np.ones(n, dtype=np.float32)

    def zeros(n):
        return np.zeros(n, dtype=np.float32)

    d = a.dim
    fan_in = 3 * a.patch * a.patch
    # The patch conv kernel: numpy (out, in, kh, kw) = ggml ne [kw, kh, in, out].
    w.add_tensor("v.patch_embd.weight",
                 (rng.standard_normal((d, 3, a.patch, a.patch), dtype=np.float32) / np.sqrt(fan_in)).astype(np.float16))
    w.add_tensor("v.patch_embd.bias", zeros(d))
    w.add_tensor("v.position_embd.weight", (rng.standard_normal((n_pos, d), dtype=np.float32) * 0.02).astype(np.float16))
    w.add_tensor("v.pre_ln.weight", ones(d))
    w.add_tensor("v.pre_ln.bias", zeros(d))
    for i in range(a.layers):
        b = f"v.blk.{i}."
        w.add_tensor(b + "ln1.weight", ones(d))
        w.add_tensor(b + "ln1.bias", zeros(d))
        for t in ("attn_q", "attn_k", "attn_v", "attn_out"):
            w.add_tensor(b + t + ".weight", mat(d, d))
            w.add_tensor(b + t + ".bias", zeros(d))
        w.add_tensor(b + "ln2.weight", ones(d))
        w.add_tensor(b + "ln2.bias", zeros(d))
        w.add_tensor(b + "ffn_up.weight", mat(a.ffn, d))
        w.add_tensor(b + "ffn_up.bias", zeros(a.ffn))
        w.add_tensor(b + "ffn_down.weight", mat(d, a.ffn))
        w.add_tensor(b + "ffn_down.bias", zeros(d))
    # llava's projector: mm.0 (linear) -> GELU -> mm.2 (linear) into the text width.
    w.add_tensor("mm.0.weight", mat(a.proj_hidden, d))
    w.add_tensor("mm.0.bias", zeros(a.proj_hidden))
    w.add_tensor("mm.2.weight", mat(n_text, a.proj_hidden))
    w.add_tensor("mm.2.bias", zeros(n_text))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"tiny-mmproj.py: wrote {a.out}: {a.layers} blocks x {d}, {a.image_size}px / {a.patch}px patches "
          f"= {n_pos} tokens per image, projected to {n_text}", file=sys.stderr)


if __name__ == "__main__":
    main()
