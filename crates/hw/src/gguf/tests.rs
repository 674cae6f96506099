//! Hand-built headers: v2, the refusals, corrupt lengths and layouts, and the
//! model and floor arithmetic.

use super::*;
use crate::floor::{ModelShape, Quant};

/// Builds GGUF bytes by hand.
#[derive(Default)]
struct W(Vec<u8>);

impl W {
    fn u32(mut self, v: u32) -> Self {
        self.0.extend(v.to_le_bytes());
        self
    }
    fn u64(mut self, v: u64) -> Self {
        self.0.extend(v.to_le_bytes());
        self
    }
    fn raw(mut self, b: &[u8]) -> Self {
        self.0.extend(b);
        self
    }
    fn str(self, s: &str) -> Self {
        self.u64(s.len() as u64).raw(s.as_bytes())
    }
    fn head(version: u32, tensors: u64, kvs: u64) -> Self {
        W::default().raw(b"GGUF").u32(version).u64(tensors).u64(kvs)
    }
    fn kv_u32(self, key: &str, v: u32) -> Self {
        self.str(key).u32(4).u32(v)
    }
    fn kv_str(self, key: &str, v: &str) -> Self {
        self.str(key).u32(8).str(v)
    }
    fn kv_u32_array(self, key: &str, v: &[u32]) -> Self {
        let mut w = self.str(key).u32(9).u32(4).u64(v.len() as u64);
        for &x in v {
            w = w.u32(x);
        }
        w
    }
    fn tensor(self, name: &str, dims: &[u64], ty: u32, offset: u64) -> Self {
        let mut w = self.str(name).u32(dims.len() as u32);
        for &d in dims {
            w = w.u64(d);
        }
        w.u32(ty).u64(offset)
    }
    /// Pads to `align` and appends `data_bytes` zero bytes.
    fn data(mut self, align: usize, data_bytes: usize) -> Vec<u8> {
        self.0
            .resize(self.0.len().next_multiple_of(align) + data_bytes, 0);
        self.0
    }
}

fn parse(bytes: &[u8]) -> Result<GgufHeader, GgufError> {
    parse_header(bytes, bytes.len() as u64)
}

#[test]
fn reads_a_v2_file() {
    let bytes = W::head(2, 2, 2)
        .kv_str("general.architecture", "llama")
        .kv_u32("general.alignment", 16)
        .tensor("a", &[32, 2], 8, 0) // q8_0: 2 blocks = 68 bytes
        .tensor("b", &[4], 0, 80) // f32: 16 bytes
        .data(16, 96);
    let h = parse(&bytes).unwrap();
    assert_eq!(h.version, 2);
    assert_eq!(h.alignment_bytes, 16);
    assert_eq!(h.data_offset % 16, 0);
    assert_eq!(
        h.get("general.architecture").unwrap().as_str(),
        Some("llama")
    );
    assert_eq!(h.tensors[0].ggml_type, GgmlType::Q8_0);
    assert_eq!(
        (h.tensors[0].size_bytes, h.tensors[0].row_bytes()),
        (68, 34)
    );
    assert_eq!(
        (h.tensors[1].offset_bytes, h.tensors[1].size_bytes),
        (80, 16)
    );
    assert_eq!(h.tensor_bytes(), 84);
    assert_eq!(h.data_offset + 96, bytes.len() as u64);
}

#[test]
fn refuses_other_magics_and_versions() {
    let e = parse(b"PK\x03\x04rest of a zip file").unwrap_err();
    assert_eq!(
        e.to_string(),
        "not a GGUF file: magic at offset 0 is 'PK..', expected 'GGUF'"
    );
    let e = parse(&W::head(1, 0, 0).0).unwrap_err();
    assert_eq!(e, GgufError::VersionOne);
    assert!(e.to_string().contains("version 1"), "{e}");
    let big = W::default()
        .raw(b"GGUF")
        .raw(&3u32.to_be_bytes())
        .u64(0)
        .u64(0);
    let e = parse(&big.0).unwrap_err();
    assert!(matches!(e, GgufError::BigEndian { version: 3, .. }), "{e}");
    assert!(e.to_string().contains("big-endian"), "{e}");
    let e = parse(&W::head(7, 0, 0).0).unwrap_err();
    assert_eq!(e, GgufError::UnsupportedVersion { version: 7 });
}

#[test]
fn short_prefixes_ask_for_more() {
    let bytes = W::head(3, 0, 1).kv_str("general.name", "x").data(32, 0);
    for len in 0..bytes.len() {
        match parse_header(&bytes[..len], bytes.len() as u64) {
            Err(GgufError::NeedMore {
                at_offset,
                needed_bytes,
                have_bytes,
            }) => {
                assert_eq!(have_bytes, len as u64);
                assert!(at_offset <= len as u64 && needed_bytes > len as u64);
            }
            // The header proper ends before the padding.
            Ok(h) => assert_eq!(h.data_offset, 64),
            Err(e) => panic!("{len}: {e}"),
        }
    }
}

#[test]
fn corrupt_lengths_name_the_offset() {
    // A key length of 10^18 at offset 24.
    let bytes = W::head(3, 0, 1).u64(1_000_000_000_000_000_000).data(32, 64);
    let e = parse(&bytes).unwrap_err();
    assert!(matches!(e, GgufError::PastEnd { offset: 32, .. }), "{e:?}");
    let s = e.to_string();
    assert!(
        s.starts_with("offset 32: metadata key 0 (1000000000000000000 bytes) takes"),
        "{s}"
    );
    // A kv count no file of this size can hold.
    let e = parse(&W::head(3, 0, u64::MAX).data(32, 0)).unwrap_err();
    assert!(matches!(e, GgufError::PastEnd { offset: 24, .. }), "{e:?}");
    // A tensor count likewise.
    let e = parse(&W::head(3, 1 << 40, 0).data(32, 0)).unwrap_err();
    assert!(e.to_string().contains("tensor infos"), "{e}");
    // An array length likewise, before anything is allocated.
    let bytes = W::head(3, 0, 1)
        .str("k")
        .u32(9)
        .u32(8)
        .u64(u64::MAX / 2)
        .data(32, 0);
    let e = parse(&bytes).unwrap_err().to_string();
    assert!(e.contains("array `k`"), "{e}");
}

#[test]
fn bad_type_ids_are_named() {
    let e = parse(&W::head(3, 0, 1).str("k").u32(13).data(32, 8)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "offset 33: metadata `k` has value type 13, expected a GGUF value type (0-12)"
    );
    let bytes = W::head(3, 1, 0).tensor("w", &[32], 4, 0).data(32, 64);
    let e = parse(&bytes).unwrap_err();
    assert!(
        matches!(&e, GgufError::UnknownTensorType { tensor, type_id: 4, .. } if tensor == "w"),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("tensor `w` has ggml type id 4"),
        "{e}"
    );
}

#[test]
fn refuses_deep_nesting_duplicates_and_bad_alignment() {
    let mut w = W::head(3, 0, 1).str("deep").u32(9);
    for _ in 0..20 {
        w = w.u32(9).u64(1);
    }
    let e = parse(&w.data(32, 64)).unwrap_err().to_string();
    assert!(e.contains("nests arrays more than 8 deep"), "{e}");
    let dup = W::head(3, 0, 2).kv_u32("a", 1).kv_u32("a", 2).data(32, 0);
    assert!(
        parse(&dup)
            .unwrap_err()
            .to_string()
            .contains("`a` appears twice")
    );
    let bad = W::head(3, 0, 1).kv_u32("general.alignment", 24).data(32, 0);
    let e = parse(&bad).unwrap_err().to_string();
    assert!(
        e.contains("general.alignment") && e.contains("power of two"),
        "{e}"
    );
    let many_dims = W::head(3, 1, 0)
        .tensor("t", &[1, 1, 1, 1, 1], 0, 0)
        .data(32, 32);
    let e = parse(&many_dims).unwrap_err().to_string();
    assert!(e.contains("tensor `t` has 5 dimensions"), "{e}");
}

#[test]
fn layout_errors_name_the_tensor() {
    let misaligned = W::head(3, 1, 0).tensor("t", &[4], 0, 8).data(32, 64);
    let e = parse(&misaligned).unwrap_err().to_string();
    assert!(
        e.starts_with("tensor `t`: data offset 8 is not a multiple"),
        "{e}"
    );
    let overlap = W::head(3, 2, 0)
        .tensor("a", &[16], 0, 0) // 64 bytes
        .tensor("b", &[4], 0, 32)
        .data(32, 128);
    let e = parse(&overlap).unwrap_err().to_string();
    assert!(
        e.starts_with("tensor `b`: data offset 32 is inside the previous tensor `a`"),
        "{e}"
    );
    let past_end = W::head(3, 1, 0).tensor("t", &[64], 0, 0).data(32, 100);
    let e = parse(&past_end).unwrap_err().to_string();
    assert!(
        e.starts_with("tensor `t`: its 256 bytes") && e.contains("past the end"),
        "{e}"
    );
    let ragged = W::head(3, 1, 0).tensor("q", &[33, 2], 2, 0).data(32, 64);
    let e = parse(&ragged).unwrap_err().to_string();
    assert!(
        e.contains("tensor `q`") && e.contains("q4_0 blocks of 32"),
        "{e}"
    );
    let overflow = W::head(3, 1, 0)
        .tensor("o", &[1 << 40, 1 << 40], 0, 0)
        .data(32, 0);
    assert!(
        parse(&overflow)
            .unwrap_err()
            .to_string()
            .contains("tensor `o`")
    );
}

/// A gemma3-like header: `layers` layers, 1 KV head of 64, window 8.
fn gemma_like(arch: &str, layers: u32, extra: impl FnOnce(W) -> W, tied: bool) -> Vec<u8> {
    let kvs = 9 + u64::from(arch == "gemma3x");
    let tensors = if tied { 3 } else { 4 };
    let mut w = W::head(3, tensors, kvs)
        .kv_str("general.architecture", arch)
        .kv_u32(&format!("{arch}.block_count"), layers)
        .kv_u32(&format!("{arch}.embedding_length"), 64)
        .kv_u32(&format!("{arch}.feed_forward_length"), 128)
        .kv_u32(&format!("{arch}.attention.head_count"), 2)
        .kv_u32(&format!("{arch}.attention.head_count_kv"), 1)
        .kv_u32(&format!("{arch}.attention.key_length"), 64)
        .kv_u32(&format!("{arch}.context_length"), 1024)
        .kv_u32(&format!("{arch}.attention.sliding_window"), 8);
    w = extra(w);
    // token_embd q8_0 [64, 10]: 10 rows of 68 bytes.
    w = w
        .tensor("token_embd.weight", &[64, 10], 8, 0)
        .tensor("blk.0.attn_norm.weight", &[64], 0, 704)
        .tensor("blk.0.ffn_down.weight", &[128, 64], 2, 960); // q4_0: 64 rows of 72
    if !tied {
        w = w.tensor("output.weight", &[64, 10], 8, 960 + 4608);
    }
    w.data(32, 960 + 4608 + 680)
}

#[test]
fn gemma3_pattern_and_tied_floor() {
    let h = parse(&gemma_like("gemma3", 12, |w| w, true)).unwrap();
    let m = h.model().unwrap();
    assert_eq!(m.sliding_source, SlidingSource::Architecture);
    let globals: Vec<usize> = (0..12).filter(|&i| !m.sliding_layers[i]).collect();
    assert_eq!(globals, [5, 11]);
    assert!(m.tied_embeddings);
    assert_eq!((m.key_length, m.value_length, m.vocab), (64, 64, 10));
    let f = file_floor(&h, &m, 100, Quant::F16);
    // Tied: the whole embedding matrix once, plus the norm and ffn_down.
    assert_eq!(f.weight_bytes_per_token, 680 + 256 + 64 * 72);
    assert_eq!(f.embedding_row_bytes, 68);
    // 2 global layers x 100 + 10 sliding x 8 positions, K+V of 64 each, 2 bytes.
    assert_eq!(f.kv_bytes_per_token, (2 * 100 + 10 * 8) * 128 * 2);
    assert_eq!(
        f.bytes_per_token,
        f.weight_bytes_per_token + f.kv_bytes_per_token
    );
    assert!(f.approximations.iter().any(|a| a.contains("tied")));
    let ms = f.ms_per_token(1.0).unwrap();
    assert!((ms - f.bytes_per_token as f64 / 1e6).abs() < 1e-12);
    assert!(f.ms_per_token(0.0).is_err());
    assert_eq!(f.by_type[0].ggml_type, GgmlType::Q4_0);
    assert!(f.unsupported.is_empty());
}

#[test]
fn untied_reads_one_embedding_row() {
    let h = parse(&gemma_like("gemma2", 4, |w| w, false)).unwrap();
    let m = h.model().unwrap();
    assert!(!m.tied_embeddings);
    assert_eq!(m.sliding_layers, [true, false, true, false]);
    let f = file_floor(&h, &m, 4, Quant::F16);
    assert_eq!(f.weight_bytes_per_token, 68 + 256 + 64 * 72 + 680);
    assert!(f.approximations.iter().any(|a| a.contains("one row")));
}

#[test]
fn pattern_key_and_unknown_architectures() {
    let h = parse(&gemma_like(
        "gemma3x",
        6,
        |w| w.kv_u32("gemma3x.attention.sliding_window_pattern", 3),
        true,
    ))
    .unwrap();
    let m = h.model().unwrap();
    assert_eq!(m.sliding_source, SlidingSource::PatternKey);
    assert_eq!(m.sliding_layers, [true, true, false, true, true, false]);
    let h = parse(&gemma_like("mystery", 3, |w| w, true)).unwrap();
    let m = h.model().unwrap();
    assert_eq!(m.sliding_source, SlidingSource::UnknownAllGlobal);
    assert_eq!(m.sliding_layer_count(), 0);
    let f = file_floor(&h, &m, 100, Quant::F16);
    assert!(
        f.approximations.iter().any(|a| a.contains("upper bound")),
        "{:?}",
        f.approximations
    );
    assert_eq!(f.kv_bytes_per_token, 3 * 100 * 128 * 2);
    // A q8_0 KV cache: 34 bytes per 32 elements.
    assert_eq!(
        kv_bytes_per_token(&m, 100, Quant::Q8_0),
        3 * 100 * 128 / 32 * 34
    );
}

#[test]
fn per_layer_arrays_and_model_shape() {
    let bytes = W::head(3, 1, 6)
        .kv_str("general.architecture", "llama")
        .kv_u32("llama.block_count", 2)
        .kv_u32("llama.embedding_length", 64)
        .kv_u32_array("llama.feed_forward_length", &[128, 256])
        .kv_u32("llama.attention.head_count", 4)
        .kv_u32_array("llama.attention.head_count_kv", &[2, 2])
        .tensor("token_embd.weight", &[64, 10], 0, 0)
        .data(32, 2560);
    let h = parse(&bytes).unwrap();
    let m = h.model().unwrap();
    assert_eq!(m.ffn_per_layer, [128, 256]);
    assert_eq!(
        (m.key_length, m.vocab, m.sliding_source),
        (16, 10, SlidingSource::NoWindow)
    );
    let e = m.to_model_shape(&h).unwrap_err().to_string();
    assert!(e.contains("FFN width varies per layer"), "{e}");
    let short = W::head(3, 0, 4)
        .kv_str("general.architecture", "llama")
        .kv_u32("llama.block_count", 3)
        .kv_u32("llama.embedding_length", 64)
        .kv_u32_array("llama.attention.head_count", &[4, 4])
        .data(32, 0);
    let e = parse(&short).unwrap().model().unwrap_err().to_string();
    assert!(
        e.contains("llama.attention.head_count") && e.contains("expected 3"),
        "{e}"
    );
    let huge = W::head(3, 0, 2)
        .kv_str("general.architecture", "llama")
        .kv_u32("llama.block_count", u32::MAX)
        .data(32, 0);
    let e = parse(&huge).unwrap().model().unwrap_err().to_string();
    assert!(
        e.contains("llama.block_count") && e.contains("at most 65536"),
        "{e}"
    );
    let none = parse(&W::head(3, 0, 0).data(32, 0)).unwrap();
    assert_eq!(
        none.model().unwrap_err(),
        GgufError::MissingKey("general.architecture".into())
    );
}

#[test]
fn gemma_like_converts_to_model_shape() {
    let h = parse(&gemma_like("gemma3", 6, |w| w, true)).unwrap();
    let shape: ModelShape = h.model().unwrap().to_model_shape(&h).unwrap();
    assert_eq!(
        (
            shape.layers,
            shape.heads,
            shape.kv_heads,
            shape.head_dim,
            shape.vocab
        ),
        (6, 2, 1, 64, 10)
    );
    assert_eq!(
        (
            shape.sliding_window,
            shape.full_attention_layers,
            shape.sliding_layers()
        ),
        (Some(8), 1, 5)
    );
    assert!(shape.tied_embeddings);
    assert_eq!(shape.norms_per_layer, 1);
}
