//! A real model file end to end: Gemma 3 270M Q4_K_M (q5_0, q4_K, q8_0, q6_K and
//! f32 tensors). `tokenscope kernels --gguf --real-weights` runs the GEMVs on the
//! file's own weights and verifies them on the GPU against the CPU dequantisation;
//! that dequantisation is in turn checked bit for bit against gguf-py (llama.cpp's
//! Python package) on real tensors of each quantised type.
//!
//! Opt-in: needs the file (`$TOKENSCOPE_GEMMA_GGUF`, else
//! `~/.cache/tokenscope/llama/models/gemma3-270m-q4_k_m.gguf`; `scripts/real-engine.sh
//! --install-only --model gemma` installs it), a GPU adapter (Mesa lavapipe without a
//! GPU; `scripts/setup.sh` installs it) and a Python with `gguf` and `numpy`
//! (`$TOKENSCOPE_GGUF_PYTHON`, else `~/.cache/tokenscope/llama/venv/bin/python`,
//! also installed by `scripts/real-engine.sh`). Missing any of them fails the test;
//! it never skips.

mod common;

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use common::text;
use kernel_harness::quant::{self, BlockQ5_0, BlockQ8_0, QK};
use serde_json::Value;
use tokenscope_hw::gguf::{GgmlType, GgufError, GgufHeader, TensorInfo, parse_header};

const INSTALL: &str = "run `scripts/real-engine.sh --install-only --model gemma` (it downloads \
                       the Gemma 3 270M GGUF and installs python with gguf-py under \
                       ~/.cache/tokenscope/llama), or set TOKENSCOPE_GEMMA_GGUF / \
                       TOKENSCOPE_GGUF_PYTHON";

fn home() -> PathBuf {
    PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
}

/// The Gemma file; fails (never skips) when it is missing.
fn gemma() -> PathBuf {
    let path = std::env::var_os("TOKENSCOPE_GEMMA_GGUF").map_or_else(
        || home().join(".cache/tokenscope/llama/models/gemma3-270m-q4_k_m.gguf"),
        PathBuf::from,
    );
    assert!(
        path.is_file(),
        "the Gemma 3 270M GGUF is missing ({}): {INSTALL}",
        path.display()
    );
    path
}

fn python() -> PathBuf {
    std::env::var_os("TOKENSCOPE_GGUF_PYTHON").map_or_else(
        || home().join(".cache/tokenscope/llama/venv/bin/python"),
        PathBuf::from,
    )
}

/// The header, read by growing prefixes (as `kernels --gguf` does).
fn header(path: &Path) -> GgufHeader {
    let mut f = File::open(path).unwrap();
    let len = f.metadata().unwrap().len();
    let mut want = (1u64 << 20).min(len);
    loop {
        let mut prefix = vec![0u8; want as usize];
        f.seek(SeekFrom::Start(0)).unwrap();
        f.read_exact(&mut prefix).unwrap();
        match parse_header(&prefix, len) {
            Err(GgufError::NeedMore { needed_bytes, .. }) if want < len => {
                want = needed_bytes.max(want * 2).min(len);
            }
            other => return other.unwrap(),
        }
    }
}

fn tensor_bytes(path: &Path, h: &GgufHeader, t: &TensorInfo) -> Vec<u8> {
    let mut f = File::open(path).unwrap();
    f.seek(SeekFrom::Start(h.data_offset + t.offset_bytes))
        .unwrap();
    let mut b = vec![0u8; t.size_bytes as usize];
    f.read_exact(&mut b).unwrap();
    b
}

#[test]
#[ignore = "opt-in: needs the Gemma 3 270M GGUF (scripts/real-engine.sh --install-only --model gemma), a GPU adapter (lavapipe) and python with gguf-py"]
fn gemma_gemvs_on_its_own_weights_match_the_cpu() {
    let gguf = gemma();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("k.json");
    let t0 = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_tokenscope"))
        .args(["kernels", "--quick", "--gguf"])
        .arg(&gguf)
        .args(["--real-weights", "--tensors-per-shape", "1", "--json"])
        .arg(&out)
        .env("XDG_RUNTIME_DIR", dir.path())
        .output()
        .unwrap();
    let secs = t0.elapsed().as_secs_f64();
    assert!(
        o.status.success(),
        "kernels --gguf --real-weights failed (without a GPU adapter, install Mesa \
         lavapipe: scripts/setup.sh):\n{}",
        text(&o)
    );
    eprintln!("kernels --quick --gguf --real-weights --tensors-per-shape 1: {secs:.1} s");

    let raw = std::fs::read_to_string(&out).unwrap();
    let doc: Value = serde_json::from_str(&raw).unwrap();
    common::assert_schema("kernels.schema.json", &doc, "k.json");
    assert_eq!(doc["verified"], true, "{}", text(&o));
    assert!(
        doc["errors"].as_array().is_none_or(Vec::is_empty),
        "{}",
        doc["errors"]
    );

    let kernels = doc["kernels"].as_array().unwrap();
    for k in kernels {
        assert_eq!(
            k["verified"], true,
            "{} {} {}: {}",
            k["name"], k["dtype"], k["shape"], k["verification"]
        );
    }
    let gemvs: Vec<&Value> = kernels.iter().filter(|k| k["name"] == "gemv").collect();
    for k in &gemvs {
        let tensors = k["tensors"].as_array().unwrap();
        assert_eq!(tensors.len(), 1, "one tensor per GEMV: {k}");
        let name = tensors[0].as_str().unwrap();
        assert!(
            k["notes"].as_array().unwrap().iter().any(|n| n
                .as_str()
                .unwrap()
                .contains(&format!("{name}, its own weights"))),
            "{name}: no own-weights note: {}",
            k["notes"]
        );
        eprintln!(
            "  gemv {} {} on {name}: {:.1} us, {:.3} GB/s, max abs err {:e}",
            k["dtype"].as_str().unwrap(),
            k["shape"],
            k["median_us"].as_f64().unwrap(),
            k["gbps"].as_f64().unwrap(),
            k["verification"]["max_abs_err"].as_f64().unwrap()
        );
    }
    for dtype in ["q4_k", "q6_k", "q5_0", "q8_0"] {
        assert!(
            gemvs.iter().any(|k| k["dtype"] == dtype),
            "no {dtype} GEMV ran"
        );
    }

    let g = &doc["gguf"];
    assert_eq!(g["real_weights"], true);
    let types = g["types"].as_array().unwrap();
    let row = |t: &str| {
        types
            .iter()
            .find(|r| r["type"] == t)
            .unwrap_or_else(|| panic!("no {t} in gguf.types: {types:?}"))
    };
    for (t, n) in [
        ("q5_0", 81),
        ("q4_K", 27),
        ("q8_0", 10),
        ("q6_K", 9),
        ("f32", 109),
    ] {
        assert_eq!(row(t)["tensors"], n, "{t}");
    }
    assert_eq!(types.len(), 5, "{types:?}");
    for t in ["q5_0", "q4_K", "q8_0", "q6_K"] {
        let r = row(t);
        assert_eq!(r["kernel"], true, "{t}");
        let gbps = r["gemv_gbps"]
            .as_f64()
            .unwrap_or_else(|| panic!("{t}: no gemv_gbps"));
        assert!(gbps > 0.0, "{t}: {gbps}");
        eprintln!(
            "  {t}: {} tensors, {} bytes, GEMV {gbps:.3} GB/s",
            r["tensors"], r["bytes"]
        );
    }
    let floors = g["floors"].as_array().unwrap();
    assert!(!floors.is_empty());
    for f in floors {
        let tpot = f["tpot_floor_ms"].as_f64().unwrap();
        let read = f["read_floor_ms"].as_f64().unwrap();
        assert!(read > 0.0 && tpot >= read, "{f}");
        eprintln!(
            "  context {}: {} bytes/token, floor at read {read:.3} ms, TPOT floor {tpot:.3} ms",
            f["context_tokens"], f["bytes_per_token"]
        );
    }
}

/// Writes each named tensor dequantised as little-endian f32 to `{dir}/{i}.f32`.
const DEQUANTIZE: &str = r#"
import sys
import numpy as np
import gguf
from gguf.quants import dequantize

path, d, names = sys.argv[1], sys.argv[2], sys.argv[3:]
by_name = {t.name: t for t in gguf.GGUFReader(path).tensors}
for i, name in enumerate(names):
    t = by_name[name]
    dequantize(t.data, t.tensor_type).astype("<f4").tofile(f"{d}/{i}.f32")
print("gguf-py", gguf.__file__)
"#;

fn our_dequantize(t: GgmlType, b: &[u8]) -> Vec<f32> {
    match t {
        GgmlType::Q4_K => quant::dequantize_q4_k(b),
        GgmlType::Q6_K => quant::dequantize_q6_k(b),
        GgmlType::Q5_0 => b
            .chunks_exact(BlockQ5_0::BYTES)
            .flat_map(|c| BlockQ5_0::from_bytes(c.try_into().unwrap()).dequantize())
            .collect(),
        GgmlType::Q8_0 => b
            .chunks_exact(BlockQ8_0::BYTES)
            .flat_map(|c| BlockQ8_0::from_bytes(c.try_into().unwrap()).dequantize())
            .collect(),
        other => panic!("no dequantisation for {other:?}"),
    }
}

#[test]
#[ignore = "opt-in: needs the Gemma 3 270M GGUF (scripts/real-engine.sh --install-only --model gemma), a GPU adapter (lavapipe) and python with gguf-py"]
fn gemma_dequantisation_matches_gguf_py() {
    let gguf = gemma();
    let h = header(&gguf);
    // The first, middle and last tensor of each type, in file order.
    let mut picked: Vec<&TensorInfo> = Vec::new();
    for ty in [
        GgmlType::Q4_K,
        GgmlType::Q6_K,
        GgmlType::Q5_0,
        GgmlType::Q8_0,
    ] {
        let of: Vec<&TensorInfo> = h.tensors.iter().filter(|t| t.ggml_type == ty).collect();
        assert!(of.len() >= 3, "{ty:?}: {} tensors", of.len());
        picked.extend([of[0], of[of.len() / 2], of[of.len() - 1]]);
    }

    let dir = tempfile::tempdir().unwrap();
    let py = python();
    let t0 = Instant::now();
    let out = Command::new(&py)
        .arg("-c")
        .arg(DEQUANTIZE)
        .arg(&gguf)
        .arg(dir.path())
        .args(picked.iter().map(|t| &t.name))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} ({e}): {INSTALL}", py.display()));
    assert!(
        out.status.success(),
        "{} failed (needs the gguf and numpy packages): {INSTALL}\n{}",
        py.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "{} ({:.1} s)",
        String::from_utf8_lossy(&out.stdout).trim(),
        t0.elapsed().as_secs_f64()
    );

    for (i, t) in picked.iter().enumerate() {
        let ours = our_dequantize(t.ggml_type, &tensor_bytes(&gguf, &h, t));
        assert_eq!(ours.len() as u64, t.elements(), "{}", t.name);
        assert_eq!(t.elements() % QK as u64, 0);
        let theirs: Vec<f32> = std::fs::read(dir.path().join(format!("{i}.f32")))
            .unwrap()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(ours.len(), theirs.len(), "{}: element count", t.name);
        let differ = ours
            .iter()
            .zip(&theirs)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count();
        if let Some(j) = ours
            .iter()
            .zip(&theirs)
            .position(|(a, b)| a.to_bits() != b.to_bits())
        {
            panic!(
                "{} ({}): {differ} of {} weights differ; first at {j}: ours {:e}, gguf-py {:e}",
                t.name,
                t.ggml_type.name(),
                ours.len(),
                ours[j],
                theirs[j]
            );
        }
        eprintln!(
            "  {} {} {:?}: {} weights bit for bit",
            t.ggml_type.name(),
            t.name,
            t.dims,
            ours.len()
        );
    }
}
