//! Our GGUF blocks byte for byte against gguf-py's (`gguf.quants`, llama.cpp's Python
//! package, whose quantizers mirror ggml's `quantize_row_*_ref`): the same f32 data
//! quantized by both must give identical bytes, and the same bytes dequantized by both
//! identical floats (bit for bit), for q8_0, q5_1, q5_0, q4_1, q4_0 and bf16.
//!
//! Opt-in: needs a Python with `gguf` and `numpy`, `$TOKENSCOPE_GGUF_PYTHON` or
//! `~/.cache/tokenscope/llama/venv/bin/python` (scripts/real-engine.sh installs it).
//! Without one the test fails, it does not skip.

use std::path::{Path, PathBuf};
use std::process::Command;

use kernel_harness::data;
use kernel_harness::quant::{
    self, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, QK, bf16_to_f32,
};

const ROWS: usize = 72;
const COLS: usize = 256;

const SCRIPT: &str = r#"
import sys
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import quantize, dequantize

d, cols = sys.argv[1], int(sys.argv[2])
x = np.fromfile(f"{d}/blocks.f32", dtype=np.float32).reshape(-1, cols)
xb = np.fromfile(f"{d}/bf16.f32", dtype=np.float32).reshape(-1, cols)
for name in sys.argv[3:]:
    src = xb if name == "BF16" else x
    q = quantize(src, T[name])
    assert q.dtype == np.uint8, (name, q.dtype)
    q.tofile(f"{d}/py_{name}.bin")
    ours = np.fromfile(f"{d}/rs_{name}.bin", dtype=np.uint8).reshape(src.shape[0], -1)
    dequantize(ours, T[name]).astype(np.float32).tofile(f"{d}/pydq_{name}.f32")
print("gguf-py", getattr(sys.modules.get("gguf"), "__file__", "?"))
"#;

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("TOKENSCOPE_GGUF_PYTHON") {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME").unwrap_or_default();
    Path::new(&home).join(".cache/tokenscope/llama/venv/bin/python")
}

/// Blocks that probe the edge cases, then seeded blocks of magnitudes 1e-5 .. 1e3
/// (f16 subnormal scales at the small end) and offsets.
fn block_data() -> Vec<f32> {
    let mut x = Vec::with_capacity(ROWS * COLS);
    let special: [[f32; QK]; 8] = [
        [0.0; QK],
        [0.5; QK],
        [-3.0; QK],
        // Ties in magnitude: the first wins (the scale's sign follows it).
        std::array::from_fn(|j| if j % 2 == 0 { 2.0 } else { -2.0 }),
        std::array::from_fn(|j| if j % 2 == 0 { -2.0 } else { 2.0 }),
        // Values on the rounding boundaries of every format.
        std::array::from_fn(|j| j as f32 / 2.0 - 8.0),
        std::array::from_fn(|j| j as f32),
        // One outlier among small values, all negative.
        std::array::from_fn(|j| if j == 17 { -100.0 } else { -(j as f32) * 0.01 }),
    ];
    for b in special {
        x.extend_from_slice(&b);
    }
    let mut rng = 12_345u32;
    while x.len() < ROWS * COLS {
        let block = x.len() / QK;
        let scale = 10f32.powi((block % 9) as i32 - 5);
        let offset = if block.is_multiple_of(3) {
            0.7 * scale
        } else {
            0.0
        };
        for _ in 0..QK {
            rng = data::pcg(rng);
            x.push((rng as f32 / u32::MAX as f32 - 0.5) * 2.0 * scale + offset);
        }
    }
    x
}

/// Every kind of f32: seeded bit patterns (NaNs, infinities, subnormals, both zeros
/// included), then the rounding ties of bf16.
fn bf16_data() -> Vec<f32> {
    let mut x: Vec<f32> = (0..ROWS * COLS / 2)
        .map(|i| f32::from_bits(data::pcg(i as u32 ^ 0xbf16)))
        .collect();
    let specials = [
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::from_bits(0x7f80_0001),
        f32::from_bits(0xff80_0001),
        f32::MAX,
        f32::MIN_POSITIVE,
        f32::from_bits(1),
    ];
    x.extend_from_slice(&specials);
    let mut i = 0u32;
    while x.len() < ROWS * COLS {
        // Exactly halfway (low half 0x8000), just below and just above.
        let hi = data::pcg(i) & 0xffff_0000;
        x.push(f32::from_bits(
            hi | [0x8000, 0x7fff, 0x8001][(i % 3) as usize],
        ));
        i += 1;
    }
    x
}

fn dequantize(name: &str, bytes: &[u8]) -> Vec<f32> {
    fn each<const N: usize, B>(
        bytes: &[u8],
        from: fn(&[u8; N]) -> B,
        deq: fn(&B) -> [f32; QK],
    ) -> Vec<f32> {
        bytes
            .chunks_exact(N)
            .flat_map(|c| deq(&from(c.try_into().unwrap())))
            .collect()
    }
    match name {
        "Q8_0" => each(bytes, BlockQ8_0::from_bytes, BlockQ8_0::dequantize),
        "Q5_1" => each(bytes, BlockQ5_1::from_bytes, BlockQ5_1::dequantize),
        "Q5_0" => each(bytes, BlockQ5_0::from_bytes, BlockQ5_0::dequantize),
        "Q4_1" => each(bytes, BlockQ4_1::from_bytes, BlockQ4_1::dequantize),
        "Q4_0" => each(bytes, BlockQ4_0::from_bytes, BlockQ4_0::dequantize),
        _ => bytes
            .chunks_exact(2)
            .map(|c| bf16_to_f32(u16::from_le_bytes([c[0], c[1]])))
            .collect(),
    }
}

fn write_f32(path: &Path, v: &[f32]) {
    std::fs::write(path, bytemuck::cast_slice::<f32, u8>(v)).unwrap();
}

#[test]
#[ignore = "opt-in: needs python with gguf-py (scripts/real-engine.sh installs it)"]
fn blocks_match_gguf_py_byte_for_byte() {
    let dir = std::env::temp_dir().join(format!("tokenscope-gguf-py-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let x = block_data();
    let xb = bf16_data();
    write_f32(&dir.join("blocks.f32"), &x);
    write_f32(&dir.join("bf16.f32"), &xb);
    let formats: [(&str, usize, Vec<u8>); 6] = [
        ("Q8_0", BlockQ8_0::BYTES, quant::quantize_q8_0(&x)),
        ("Q5_1", BlockQ5_1::BYTES, quant::quantize_q5_1(&x)),
        ("Q5_0", BlockQ5_0::BYTES, quant::quantize_q5_0(&x)),
        ("Q4_1", BlockQ4_1::BYTES, quant::quantize_q4_1(&x)),
        ("Q4_0", BlockQ4_0::BYTES, quant::quantize_q4_0(&x)),
        (
            "BF16",
            2,
            bytemuck::cast_slice(&quant::quantize_bf16(&xb)).to_vec(),
        ),
    ];
    for (name, _, bytes) in &formats {
        std::fs::write(dir.join(format!("rs_{name}.bin")), bytes).unwrap();
    }
    let py = python();
    let out = Command::new(&py)
        .arg("-c")
        .arg(SCRIPT)
        .arg(&dir)
        .arg(COLS.to_string())
        .args(formats.iter().map(|f| f.0))
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {} ({e}): set TOKENSCOPE_GGUF_PYTHON to a python with gguf and \
                 numpy, or run scripts/real-engine.sh",
                py.display()
            )
        });
    assert!(
        out.status.success(),
        "{} failed (needs the gguf and numpy packages; scripts/real-engine.sh installs \
         them):\n{}",
        py.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{}", String::from_utf8_lossy(&out.stdout).trim());
    for (name, block, ours) in &formats {
        let theirs = std::fs::read(dir.join(format!("py_{name}.bin"))).unwrap();
        assert_eq!(ours.len(), theirs.len(), "{name}: byte count");
        let blocks = ours.len() / block;
        if let Some(b) = (0..blocks)
            .find(|b| ours[b * block..(b + 1) * block] != theirs[b * block..(b + 1) * block])
        {
            panic!(
                "{name}: block {b} of {blocks} differs\n ours    {:02x?}\n gguf-py {:02x?}",
                &ours[b * block..(b + 1) * block],
                &theirs[b * block..(b + 1) * block]
            );
        }
        let py_deq: Vec<f32> = bytemuck::pod_collect_to_vec(
            &std::fs::read(dir.join(format!("pydq_{name}.f32"))).unwrap(),
        );
        let our_deq = dequantize(name, ours);
        assert_eq!(our_deq.len(), py_deq.len(), "{name}: dequantized count");
        for (i, (a, b)) in our_deq.iter().zip(&py_deq).enumerate() {
            assert_eq!(
                a.to_bits(),
                b.to_bits(),
                "{name}: dequantized weight {i}: ours {a:e}, gguf-py {b:e}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
