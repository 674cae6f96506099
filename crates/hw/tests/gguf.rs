//! The GGUF header reader against gguf-py's own reading of files gguf-py wrote
//! (`tests/fixtures/gguf/`, made by `scripts/gguf-fixture.py`), every prefix and
//! corruption of them, and (opt-in) the real Gemma 3 270M Q4_K_M file.

use proptest::prelude::*;
use serde_json::Value as Json;
use tokenscope_hw::floor::{ModelShape, Quant};
use tokenscope_hw::gguf::{
    GgmlType, GgufError, GgufHeader, SlidingSource, Value, ValueType, file_floor, parse_header,
};

fn fixture(name: &str) -> (Vec<u8>, Json) {
    let dir = format!("{}/tests/fixtures/gguf", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(format!("{dir}/{name}.gguf")).unwrap();
    let json = std::fs::read_to_string(format!("{dir}/{name}.json")).unwrap();
    (bytes, serde_json::from_str(&json).unwrap())
}

fn whole(bytes: &[u8]) -> GgufHeader {
    parse_header(bytes, bytes.len() as u64).unwrap()
}

/// The type ids gguf-py lists for a value: its type, then element types down.
fn type_chain(v: &Value) -> Vec<u64> {
    let mut out = vec![u64::from(v.value_type().id())];
    if let Value::Array(a) = v {
        match a.values.as_ref().and_then(|v| v.first()) {
            Some(first) => out.extend(type_chain(first)),
            None => out.push(u64::from(a.elem_type.id())),
        }
    }
    out
}

fn as_json(v: &Value) -> Json {
    match v {
        Value::U8(x) => (*x).into(),
        Value::I8(x) => (*x).into(),
        Value::U16(x) => (*x).into(),
        Value::I16(x) => (*x).into(),
        Value::U32(x) => (*x).into(),
        Value::I32(x) => (*x).into(),
        Value::U64(x) => (*x).into(),
        Value::I64(x) => (*x).into(),
        Value::F32(x) => f64::from(*x).into(),
        Value::F64(x) => (*x).into(),
        Value::Bool(x) => (*x).into(),
        Value::String(s) => s.clone().into(),
        Value::Array(a) => a.values.as_ref().unwrap().iter().map(as_json).collect(),
    }
}

fn check_against_gguf_py(name: &str) -> GgufHeader {
    let (bytes, py) = fixture(name);
    let h = whole(&bytes);
    assert_eq!(u64::from(h.version), py["version"].as_u64().unwrap());
    assert_eq!(h.alignment_bytes, py["alignment"].as_u64().unwrap());
    assert_eq!(h.data_offset, py["data_offset"].as_u64().unwrap());
    assert_eq!(h.file_len_bytes, py["file_len"].as_u64().unwrap());
    let fields = py["fields"].as_array().unwrap();
    assert_eq!(h.metadata.len(), fields.len());
    for (e, f) in h.metadata.iter().zip(fields) {
        assert_eq!(e.key, f["key"].as_str().unwrap());
        let types: Vec<u64> = f["types"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_u64().unwrap())
            .collect();
        assert_eq!(type_chain(&e.value), types, "{}", e.key);
        match &e.value {
            Value::Array(a) => {
                if types.len() == 2 {
                    // gguf-py reads nested arrays only as a flat part list.
                    assert_eq!(a.len, f["len"].as_u64().unwrap(), "{}", e.key);
                }
                if let (Some(_), Some(expect)) = (&a.values, f.get("value")) {
                    assert_eq!(&as_json(&e.value), expect, "{}", e.key);
                }
            }
            v => assert_eq!(as_json(v), f["value"], "{}", e.key),
        }
    }
    let tensors = py["tensors"].as_array().unwrap();
    assert_eq!(h.tensors.len(), tensors.len());
    for (t, p) in h.tensors.iter().zip(tensors) {
        assert_eq!(t.name, p["name"].as_str().unwrap());
        assert_eq!(
            u64::from(t.ggml_type.id()),
            p["type"].as_u64().unwrap(),
            "{}",
            t.name
        );
        let dims: Vec<u64> = p["dims"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        assert_eq!(t.dims, dims, "{}", t.name);
        assert_eq!(
            h.data_offset + t.offset_bytes,
            p["data_offset"].as_u64().unwrap(),
            "{}",
            t.name
        );
        assert_eq!(t.size_bytes, p["n_bytes"].as_u64().unwrap(), "{}", t.name);
    }
    h
}

#[test]
fn tiny_matches_gguf_py() {
    let h = check_against_gguf_py("tiny");
    assert_eq!(h.get("test.u64").unwrap(), &Value::U64((1 << 63) + 5));
    assert_eq!(h.get("test.string").unwrap().as_str(), Some("héllo gguf"));
    let nested = h.get("test.nested").unwrap().as_array().unwrap();
    assert_eq!((nested.elem_type, nested.len), (ValueType::Array, 2));
    assert_eq!(
        as_json(h.get("test.nested").unwrap()),
        serde_json::json!([[1, 2], [3, 4, 5]])
    );
    let long = h.get("test.long_strings").unwrap().as_array().unwrap();
    assert_eq!(
        (long.elem_type, long.len, long.values.is_none()),
        (ValueType::String, 100, true)
    );

    let m = h.model().unwrap();
    assert_eq!(
        (m.architecture.as_str(), m.name.as_deref()),
        ("llama", Some("tiny"))
    );
    assert_eq!((m.layers, m.hidden, m.vocab, m.key_length), (2, 32, 72, 8));
    assert_eq!(
        (m.heads_per_layer.clone(), m.kv_heads_per_layer.clone()),
        (vec![4, 4], vec![2, 2])
    );
    assert_eq!(
        (m.context_length, m.sliding_source),
        (Some(128), SlidingSource::NoWindow)
    );
    assert!(m.tied_embeddings);

    let f = file_floor(&h, &m, 100, Quant::F16);
    // Tied: every tensor whole, token_embd once.
    assert_eq!(f.weight_bytes_per_token, h.tensor_bytes());
    assert_eq!(f.embedding_row_bytes, 18);
    // 2 layers x 2 KV heads x (8 + 8) x 100 positions x 2 bytes.
    assert_eq!(f.kv_bytes_per_token, 2 * 2 * 16 * 100 * 2);
    let types: Vec<&str> = f.by_type.iter().map(|t| t.ggml_type.name()).collect();
    assert_eq!(
        types,
        [
            "q4_0", "q4_K", "f32", "q6_K", "q8_0", "f16", "bf16", "q5_0", "iq4_nl"
        ]
    );
    assert_eq!(f.unsupported.len(), 1);
    assert_eq!(f.unsupported[0].ggml_type, GgmlType::IQ4_NL);
    assert_eq!(f.unsupported[0].tensors, ["blk.1.ffn_gate.weight"]);
    let json = serde_json::to_value(&f).unwrap();
    assert_eq!(
        json["by_type"][1],
        serde_json::json!({"type": "q4_K", "tensors": 1, "bytes": 288})
    );
    assert_eq!(json["unsupported"][0]["type"], "iq4_nl");
    assert_eq!(json["kv_dtype"], "f16");
    let back: tokenscope_hw::gguf::FileFloor = serde_json::from_value(json).unwrap();
    assert_eq!(back, f);
}

#[test]
fn aligned64_matches_gguf_py() {
    let h = check_against_gguf_py("aligned64");
    assert_eq!(h.alignment_bytes, 64);
    let m = h.model().unwrap();
    assert!(!m.tied_embeddings);
    assert_eq!(m.kv_heads_per_layer, [1, 1, 2, 1]);
    assert_eq!(m.sliding_layers, [true, false, true, false]);
    assert_eq!(m.sliding_source, SlidingSource::PatternKey);
    let f = file_floor(&h, &m, 100, Quant::F16);
    let embd = h.tensor("token_embd.weight").unwrap();
    assert_eq!(
        f.weight_bytes_per_token,
        h.tensor_bytes() - embd.size_bytes + 68
    );
    // Positions: layer 0 16, layer 1 100, layer 2 (2 heads) 16, layer 3 100.
    assert_eq!(f.kv_bytes_per_token, (16 + 100 + 2 * 16 + 100) * 64 * 2);
    // Per-layer KV heads do not fit one ModelShape.
    assert!(
        m.to_model_shape(&h)
            .unwrap_err()
            .to_string()
            .contains("KV head count varies")
    );
}

#[test]
fn gguf_py_type_table_matches() {
    let (_, py) = fixture("tiny");
    let sizes = py["quant_sizes"].as_object().unwrap();
    for (id, bs) in sizes {
        let t = GgmlType::from_id(id.parse().unwrap()).unwrap_or_else(|| panic!("id {id}"));
        assert_eq!(
            [t.block_elems(), t.block_bytes()],
            [bs[0].as_u64().unwrap(), bs[1].as_u64().unwrap()],
            "{t}"
        );
        assert!(
            t.name()
                .eq_ignore_ascii_case(py["type_names"][id].as_str().unwrap()),
            "{t}"
        );
    }
    assert_eq!(sizes.len(), GgmlType::ALL.len());
}

#[test]
fn every_prefix_asks_for_more_then_reads_the_same() {
    for name in ["tiny", "aligned64"] {
        let (bytes, _) = fixture(name);
        let full = whole(&bytes);
        let file_len = bytes.len() as u64;
        let data_end = full.data_offset
            + full
                .tensors
                .iter()
                .map(|t| t.offset_bytes + t.size_bytes)
                .max()
                .unwrap();
        for len in 0..bytes.len() {
            match parse_header(&bytes[..len], file_len) {
                Ok(h) => assert_eq!(h, full, "{name}: prefix {len}"),
                Err(GgufError::NeedMore {
                    at_offset,
                    needed_bytes,
                    have_bytes,
                }) => {
                    assert!(
                        at_offset <= len as u64
                            && needed_bytes > len as u64
                            && have_bytes == len as u64
                    );
                    assert!(
                        needed_bytes <= full.data_offset,
                        "{name}: prefix {len} asks for {needed_bytes}"
                    );
                }
                Err(e) => panic!("{name}: prefix {len}: {e}"),
            }
            // The file itself cut short: an error naming an offset (inside the
            // header) or a tensor (inside the padding or the data), never a panic;
            // the padding after the last tensor may go.
            let cut = parse_header(&bytes[..len], len as u64);
            if len as u64 >= data_end {
                assert_eq!(cut.unwrap().tensors, full.tensors);
                continue;
            }
            let e = cut.unwrap_err();
            assert!(
                matches!(
                    e,
                    GgufError::PastEnd { .. } | GgufError::TensorLayout { .. }
                ),
                "{name}: file of {len}: {e}"
            );
            if (len as u64) < full.data_offset - full.alignment_bytes {
                assert!(
                    matches!(e, GgufError::PastEnd { .. }),
                    "{name}: file of {len}: {e}"
                );
            }
        }
    }
}

#[test]
fn corrupt_fixture_fields_are_named() {
    let (bytes, _) = fixture("tiny");
    let mut bad = bytes.clone();
    bad[..4].copy_from_slice(b"GGML");
    assert_eq!(
        whole_err(&bad),
        "not a GGUF file: magic at offset 0 is 'GGML', expected 'GGUF'"
    );
    let mut bad = bytes.clone();
    bad[4..8].copy_from_slice(&3u32.to_be_bytes());
    assert!(whole_err(&bad).contains("big-endian"));
    // First key's length (offset 24) made huge.
    let mut bad = bytes.clone();
    bad[24..32].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let e = whole_err(&bad);
    assert!(
        e.starts_with("offset 32: metadata key 0 (1152921504606846976 bytes) takes"),
        "{e}"
    );
    // The first tensor's type id.
    let h = whole(&bytes);
    let pos = find(&bytes, b"token_embd.weight") + "token_embd.weight".len() + 4 + 2 * 8;
    let mut bad = bytes.clone();
    bad[pos..pos + 4].copy_from_slice(&99u32.to_le_bytes());
    let e = whole_err(&bad);
    assert_eq!(
        e,
        format!(
            "offset {pos}: tensor `token_embd.weight` has ggml type id 99, which is not a ggml type (known ids: 0-3, 6-30, 34, 35, 39-41)"
        )
    );
    assert_eq!(h.tensors[0].name, "token_embd.weight");
}

fn whole_err(bytes: &[u8]) -> String {
    parse_header(bytes, bytes.len() as u64)
        .unwrap_err()
        .to_string()
}

fn find(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).position(|w| w == needle).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), extra in 0u64..1 << 40) {
        let _ = parse_header(&bytes, bytes.len() as u64);
        let _ = parse_header(&bytes, bytes.len() as u64 + extra);
        let mut g = b"GGUF\x03\0\0\0".to_vec();
        g.extend(&bytes);
        if let Ok(h) = parse_header(&g, g.len() as u64)
            && let Ok(m) = h.model()
        {
            let _ = file_floor(&h, &m, 4096, Quant::F16);
            let _ = m.to_model_shape(&h);
        }
    }

    #[test]
    fn mutated_fixtures_never_panic(
        which in any::<bool>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let (mut bytes, _) = fixture(if which { "tiny" } else { "aligned64" });
        for (i, b) in edits {
            let i = i.index(bytes.len());
            bytes[i] = b;
        }
        let len = cut.index(bytes.len() + 1);
        let _ = parse_header(&bytes[..len], bytes.len() as u64);
        if let Ok(h) = parse_header(&bytes, bytes.len() as u64)
            && let Ok(m) = h.model()
        {
            let f = file_floor(&h, &m, 1 << 20, Quant::Q8_0);
            prop_assert!(f.weight_bytes_per_token <= h.tensor_bytes());
            let _ = m.to_model_shape(&h);
        }
    }
}

/// Reads the header of the file at `path` the way a caller should: a growing prefix.
fn read_header_prefix(path: &str) -> (GgufHeader, u64) {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let file_len = f.metadata().unwrap().len();
    let mut want = 1u64 << 20;
    loop {
        let mut buf = Vec::new();
        f.seek(SeekFrom::Start(0)).unwrap();
        (&mut f).take(want).read_to_end(&mut buf).unwrap();
        match parse_header(&buf, file_len) {
            Err(GgufError::NeedMore { needed_bytes, .. }) => want = needed_bytes.max(want * 2),
            other => return (other.unwrap(), buf.len() as u64),
        }
    }
}

/// Expected figures from gguf-py 0.19.0's GGUFReader on the same file:
/// `python -c "import gguf,collections; r=gguf.GGUFReader(P); print(collections.Counter(t.tensor_type.name for t in r.tensors), sum(int(t.n_bytes) for t in r.tensors), r.data_offset)"`
/// -> F32 109, Q5_0 81, Q4_K 27, Q8_0 10, Q6_K 9; 246587904 bytes; data offset 6525120.
#[test]
#[ignore = "opt-in: needs the Gemma 3 270M GGUF (scripts/real-engine.sh --install-only --model gemma)"]
fn gemma3_270m_q4_k_m() {
    let path = std::env::var("TOKENSCOPE_GEMMA_GGUF").unwrap_or_else(|_| {
        format!(
            "{}/.cache/tokenscope/llama/models/gemma3-270m-q4_k_m.gguf",
            std::env::var("HOME").unwrap()
        )
    });
    let (h, read) = read_header_prefix(&path);
    assert!(
        read < h.file_len_bytes / 10,
        "read {read} bytes of {}",
        h.file_len_bytes
    );
    assert_eq!(
        (h.version, h.data_offset, h.tensors.len()),
        (3, 6_525_120, 236)
    );
    let count = |t: GgmlType| h.tensors.iter().filter(|x| x.ggml_type == t).count();
    assert_eq!(
        [
            GgmlType::F32,
            GgmlType::Q5_0,
            GgmlType::Q4_K,
            GgmlType::Q8_0,
            GgmlType::Q6_K
        ]
        .map(count),
        [109, 81, 27, 10, 9]
    );
    assert_eq!(h.tensor_bytes(), 246_587_904);

    let m = h.model().unwrap();
    assert_eq!(m.architecture, "gemma3");
    assert_eq!(
        (m.layers, m.hidden, m.key_length, m.value_length),
        (18, 640, 256, 256)
    );
    assert!(
        m.heads_per_layer.iter().all(|&x| x == 4) && m.kv_heads_per_layer.iter().all(|&x| x == 1)
    );
    assert_eq!(
        (m.vocab, m.context_length, m.sliding_window),
        (262_144, Some(32_768), Some(512))
    );
    assert_eq!(
        (m.sliding_layer_count(), m.sliding_source),
        (15, SlidingSource::Architecture)
    );
    assert!(m.tied_embeddings);

    let f = file_floor(&h, &m, 2048, Quant::F16);
    // Tied: every tensor once, token_embd whole (q8_0, 178257920 bytes).
    assert_eq!(f.weight_bytes_per_token, 246_587_904);
    assert_eq!(f.embedding_row_bytes, 680);
    // (3 global x 2048 + 15 sliding x 512) positions x 1 KV head x (256 + 256) x 2 bytes.
    assert_eq!(f.kv_bytes_per_token, 14_155_776);
    let f = file_floor(&h, &m, 32_768, Quant::F16);
    assert_eq!(f.kv_bytes_per_token, 108_527_616);
    assert!(f.unsupported.is_empty());

    // The file's shape is the preset's.
    let shape = m.to_model_shape(&h).unwrap();
    let preset = ModelShape::preset("gemma-3-270m").unwrap();
    assert_eq!(
        ModelShape {
            name: preset.name.clone(),
            ..shape
        },
        preset
    );
}

#[test]
fn gemv_groups_are_the_files_kernel_weights_by_type_and_shape() {
    let (bytes, _) = fixture("tiny");
    let h = whole(&bytes);
    assert!(h.model().unwrap().tied_embeddings);
    let got: Vec<(Quant, u64, u64, Vec<String>)> = h
        .gemv_groups(true)
        .into_iter()
        .map(|g| (g.dtype, g.rows, g.cols, g.tensors))
        .collect();
    let want = [
        (Quant::Q4_0, 72, 32, "token_embd.weight"),
        (Quant::Q4K, 2, 256, "blk.0.attn_q.weight"),
        (Quant::F16, 2, 32, "blk.0.attn_k.weight"),
        (Quant::Bf16, 2, 32, "blk.0.attn_v.weight"),
        (Quant::Q8_0, 3, 64, "blk.0.attn_output.weight"),
        (Quant::Q6K, 1, 256, "blk.0.ffn_down.weight"),
        (Quant::Q5_0, 2, 32, "blk.1.ffn_up.weight"),
    ]
    .map(|(q, r, c, n)| (q, r, c, vec![n.to_string()]))
    .to_vec();
    // iq4_nl (blk.1.ffn_gate) has no kernel; the norms are 1-D.
    assert_eq!(got, want);
    // Untied: token_embd is a row lookup, not a GEMV.
    assert_eq!(h.gemv_groups(false).len(), want.len() - 1);
    // Two tensors of one type and shape are one group.
    let mut h2 = h.clone();
    let mut t = h2.tensor("blk.0.attn_k.weight").unwrap().clone();
    t.name = "blk.1.attn_k.weight".into();
    h2.tensors.push(t);
    let g = h2.gemv_groups(true);
    assert_eq!(g.len(), want.len());
    assert_eq!(g[2].tensors, ["blk.0.attn_k.weight", "blk.1.attn_k.weight"]);
}
