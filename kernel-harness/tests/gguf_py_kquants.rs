//! Our q4_K / q5_K / q6_K dequantization against gguf-py's (`gguf.quants.dequantize`),
//! bit for bit, on deterministic random super-blocks (every bit pattern, with finite
//! `d` / `dmin`, is a valid block) and on blocks from our quantizers.
//!
//! Exact equality is expected: gguf-py computes in float32 numpy with the same
//! operations in the same order as ggml's `dequantize_row_q*_K` (q4_K/q5_K:
//! `(d * sc) * q - dmin * m`; q6_K: `(d * scale) * q`), each rounded once, no fused
//! multiply-add, and so does our Rust. gguf-py has no K-quant quantizer, so the
//! quantizers are checked through their round trip only.
//!
//! Python: `$TOKENSCOPE_GGUF_PYTHON`, else `~/.cache/tokenscope/llama/venv/bin/python`
//! (scripts/real-engine.sh creates it). A missing python or gguf package fails the test.

use std::path::PathBuf;
use std::process::Command;

use half::f16;
use kernel_harness::quant;

const SCRIPT: &str = r#"
import sys
import numpy as np
from gguf import GGMLQuantizationType
from gguf.quants import dequantize
for spec in sys.argv[1:]:
    kind, src, dst = spec.split(",")
    raw = np.fromfile(src, dtype=np.uint8)
    out = dequantize(raw, GGMLQuantizationType[kind]).astype(np.float32, copy=False)
    out.reshape(-1).tofile(dst)
"#;

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("TOKENSCOPE_GGUF_PYTHON") {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME").expect("HOME is not set");
    PathBuf::from(home).join(".cache/tokenscope/llama/venv/bin/python")
}

struct Rng(u32);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
        kernel_harness::data::pcg(self.0)
    }
}

/// A random finite f16 (any sign; normal, subnormal or zero).
fn finite_f16(rng: &mut Rng) -> [u8; 2] {
    let mut bits = rng.next() as u16;
    if bits & 0x7c00 == 0x7c00 {
        bits &= !0x4000; // an exponent of all ones would be inf/NaN
    }
    f16::from_bits(bits).to_le_bytes()
}

/// `n` random super-blocks of `bytes` bytes with finite f16 fields at `f16_at`.
fn random_blocks(rng: &mut Rng, n: usize, bytes: usize, f16_at: &[usize]) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * bytes);
    for _ in 0..n {
        let mut b: Vec<u8> = (0..bytes).map(|_| rng.next() as u8).collect();
        for &at in f16_at {
            b[at..at + 2].copy_from_slice(&finite_f16(rng));
        }
        out.extend(b);
    }
    out
}

fn weights(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let u = (rng.next() >> 8) as f32 / (1u32 << 24) as f32 - 0.5;
            u * (0.01 + (i % 53) as f32 / 7.0)
        })
        .collect()
}

#[test]
#[ignore = "opt-in: needs python with gguf-py (scripts/real-engine.sh installs it)"]
fn k_quant_dequantization_matches_gguf_py_bitwise() {
    let py = python();
    assert!(
        py.exists(),
        "no python at {} (set TOKENSCOPE_GGUF_PYTHON, or run scripts/real-engine.sh to \
         create the venv with gguf-py)",
        py.display()
    );
    let mut rng = Rng(2024);
    let dir =
        std::env::temp_dir().join(format!("tokenscope-gguf-py-kquants-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let n = 512;
    let x = weights(&mut rng, 64 * 256);
    type Deq = fn(&[u8]) -> Vec<f32>;
    let cases: Vec<(&str, Vec<u8>, Deq, usize)> = vec![
        {
            let mut g = random_blocks(&mut rng, n, 144, &[0, 2]);
            g.extend(quant::quantize_q4_k(&x));
            ("Q4_K", g, quant::dequantize_q4_k, 144)
        },
        {
            let mut g = random_blocks(&mut rng, n, 176, &[0, 2]);
            g.extend(quant::quantize_q5_k(&x));
            ("Q5_K", g, quant::dequantize_q5_k, 176)
        },
        {
            let mut g = random_blocks(&mut rng, n, 210, &[208]);
            g.extend(quant::quantize_q6_k(&x));
            ("Q6_K", g, quant::dequantize_q6_k, 210)
        },
    ];
    let mut args = Vec::new();
    for (kind, gguf, _, _) in &cases {
        let src = dir.join(format!("{kind}.bin"));
        std::fs::write(&src, gguf).unwrap();
        args.push(format!(
            "{kind},{},{}",
            src.display(),
            dir.join(format!("{kind}.f32")).display()
        ));
    }
    let out = Command::new(&py)
        .arg("-c")
        .arg(SCRIPT)
        .args(&args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", py.display()));
    assert!(
        out.status.success(),
        "gguf-py failed ({}; is the gguf package installed in that python?):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    for (kind, gguf, ours, bytes) in &cases {
        let raw = std::fs::read(dir.join(format!("{kind}.f32"))).unwrap();
        let theirs: Vec<f32> = raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let ours = ours(gguf);
        assert_eq!(ours.len(), gguf.len() / bytes * 256, "{kind}");
        assert_eq!(
            theirs.len(),
            ours.len(),
            "{kind}: gguf-py returned a different count"
        );
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert!(
                a.to_bits() == b.to_bits(),
                "{kind}: weight {i} (super-block {}): ours {a:e} ({:#010x}), gguf-py {b:e} ({:#010x})",
                i / 256,
                a.to_bits(),
                b.to_bits()
            );
        }
        // Our repacked layout describes the same blocks.
        let back: Vec<u8> = match *kind {
            "Q4_K" => {
                let r = quant::repack_q4_k(gguf);
                (0..gguf.len() / bytes)
                    .flat_map(|b| r.q4_k(b).to_bytes())
                    .collect()
            }
            "Q5_K" => {
                let r = quant::repack_q5_k(gguf);
                (0..gguf.len() / bytes)
                    .flat_map(|b| r.q5_k(b).to_bytes())
                    .collect()
            }
            _ => {
                let r = quant::repack_q6_k(gguf);
                (0..gguf.len() / bytes)
                    .flat_map(|b| r.q6_k(b).to_bytes())
                    .collect()
            }
        };
        assert!(back == *gguf, "{kind}: repack round trip");
    }
    std::fs::remove_dir_all(&dir).ok();
}
