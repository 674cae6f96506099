//! The decode-attention variant space (`shaders/attention_decode.wgsl`): threads per
//! workgroup, cache elements per load (4, or 8 f16 in one 16-byte load), and for
//! split-KV the positions per split, which sets how many workgroups share a KV head,
//! and whether a tile's V rows are loaded with its K rows (`_kv`: in flight through
//! the softmax's barriers) or after them. Written `c256_t128_v8_kv` (chunk 0: the
//! single-pass kernel).

use tokenscope_hw::floor::Quant;

use tokenscope_kernel_report::AdapterReport;

use super::spec::AttentionSpec;
use crate::kernels::VariantCaps;
use crate::tune::{Choice, Family, Tuning};

/// One point of the space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AttentionVariant {
    /// Positions per split (0: one workgroup per KV head, the single-pass kernel).
    pub chunk: u32,
    /// Threads per workgroup.
    pub threads: u32,
    /// Cache elements per load: 4, or 8 (f16 only).
    pub vec: u32,
    /// A tile's V rows loaded together with its K rows, before the softmax (more
    /// bytes in flight, more registers), rather than after it.
    pub kv_together: bool,
}

const CHUNKS: [u32; 8] = [32, 64, 128, 256, 512, 1024, 2048, 4096];

impl AttentionVariant {
    /// The variant `spec` runs here: the tuning's, else this adapter's default.
    pub fn choose(
        tuning: &Tuning,
        spec: &AttentionSpec,
        caps: &VariantCaps,
        adapter: &AdapterReport,
    ) -> Choice<AttentionVariant> {
        let shape = spec.shape();
        tuning.choose(
            (
                spec.name(),
                spec.kv_dtype.as_str(),
                &shape,
                1,
                Some(spec.kv_heads),
            ),
            |name| {
                AttentionVariant::parse(name)
                    .ok()
                    .filter(|v| v.check(spec, caps).is_none())
            },
            || attention_default(spec, caps, adapter),
        )
    }

    /// `c256_t128_v8`.
    pub fn name(&self) -> String {
        format!(
            "c{}_t{}_v{}{}",
            self.chunk,
            self.threads,
            self.vec,
            if self.kv_together { "_kv" } else { "" }
        )
    }

    /// Parses a name written by [`AttentionVariant::name`].
    pub fn parse(s: &str) -> Result<AttentionVariant, String> {
        let bad = || format!("`{s}` is not an attention variant (expected e.g. c256_t128_v8)");
        let mut parts = s.split('_');
        let mut num = |prefix: &str| -> Result<u32, String> {
            parts
                .next()
                .and_then(|p| p.strip_prefix(prefix))
                .and_then(|n| n.parse().ok())
                .ok_or_else(bad)
        };
        let mut v = AttentionVariant {
            chunk: num("c")?,
            threads: num("t")?,
            vec: num("v")?,
            kv_together: false,
        };
        match parts.next() {
            None => {}
            Some("kv") => v.kv_together = true,
            Some(_) => return Err(bad()),
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(v)
    }

    /// Loads per head row.
    fn loads_per_row(&self, spec: &AttentionSpec) -> u32 {
        spec.head_dim / self.vec
    }

    /// Threads per position in the score phase: the most of 4, 2, 1 dividing the
    /// loads of a row.
    pub fn lanes(&self, spec: &AttentionSpec) -> u32 {
        let hv = self.loads_per_row(spec).max(1);
        [4, 2, 1]
            .into_iter()
            .find(|l| hv.is_multiple_of(*l))
            .unwrap_or(1)
    }

    /// Positions per tile.
    pub fn tile(&self, spec: &AttentionSpec) -> u32 {
        self.threads / self.lanes(spec)
    }

    /// Splits per KV head and positions per split.
    pub fn splits(&self, spec: &AttentionSpec) -> (u32, u32) {
        let tile = self.tile(spec);
        if self.chunk == 0 || !spec.split {
            return (1, spec.context.next_multiple_of(tile));
        }
        let chunk = self.chunk.next_multiple_of(tile);
        (spec.context.div_ceil(chunk), chunk)
    }

    /// Workgroup memory the kernel declares, bytes.
    pub fn workgroup_bytes(&self, spec: &AttentionSpec) -> u64 {
        let g = u64::from(spec.group());
        let hq = u64::from(spec.head_dim / 4);
        let wg = u64::from(self.threads);
        let tile = u64::from(self.tile(spec));
        let pg = wg / u64::from(self.loads_per_row(spec).max(1));
        g * hq * 16 + wg * g * 4 + g * tile * 4 + pg * hq * 16 + pg * 4 + g * 4
    }

    /// Why this variant cannot run `spec` here (None: it can).
    pub fn check(&self, spec: &AttentionSpec, caps: &VariantCaps) -> Option<String> {
        if !matches!(self.threads, 64 | 128 | 256) || self.threads > caps.max_threads {
            return Some(format!("{} threads", self.threads));
        }
        match self.vec {
            4 => {}
            8 if spec.kv_dtype == Quant::F16 => {}
            _ => return Some(format!("{} elements per load", self.vec)),
        }
        if !spec.head_dim.is_multiple_of(self.vec) {
            return Some(format!(
                "head_dim {} is not a multiple of {}",
                spec.head_dim, self.vec
            ));
        }
        // The final reduction gives each 4-vector of a head row its own thread.
        if spec.head_dim / 4 > self.threads {
            return Some(format!(
                "head_dim {} needs {} threads",
                spec.head_dim,
                spec.head_dim / 4
            ));
        }
        match (spec.split, self.chunk) {
            (false, 0) => {}
            (false, _) => return Some("the single-pass kernel has no chunk".into()),
            (true, c) if !c.is_multiple_of(32) || !(CHUNKS[0]..=CHUNKS[7]).contains(&c) => {
                return Some(format!("chunk {c} (a multiple of 32 in 32..4096)"));
            }
            _ => {}
        }
        let need = self.workgroup_bytes(spec);
        if need > u64::from(caps.max_workgroup_bytes) {
            return Some(format!(
                "{need} bytes of workgroup memory, the device has {}",
                caps.max_workgroup_bytes
            ));
        }
        None
    }

    /// One step away in each parameter.
    pub fn neighbours(&self) -> Vec<AttentionVariant> {
        let mut out = Vec::new();
        for threads in [self.threads / 2, self.threads * 2] {
            out.push(AttentionVariant { threads, ..*self });
        }
        out.push(AttentionVariant {
            vec: if self.vec == 4 { 8 } else { 4 },
            ..*self
        });
        out.push(AttentionVariant {
            kv_together: !self.kv_together,
            ..*self
        });
        if self.chunk > 0 {
            for chunk in [self.chunk / 2, self.chunk * 2] {
                out.push(AttentionVariant { chunk, ..*self });
            }
        }
        out
    }

    /// Every variant that can run `spec` here.
    pub fn space(spec: &AttentionSpec, caps: &VariantCaps) -> Vec<AttentionVariant> {
        let chunks: Vec<u32> = if spec.split {
            CHUNKS
                .into_iter()
                .filter(|&c| c <= spec.context.next_power_of_two())
                .collect()
        } else {
            vec![0]
        };
        let mut out = Vec::new();
        for chunk in chunks {
            for threads in [64, 128, 256] {
                for vec in [4, 8] {
                    for kv_together in [false, true] {
                        let v = AttentionVariant {
                            chunk,
                            threads,
                            vec,
                            kv_together,
                        };
                        if v.check(spec, caps).is_none() {
                            out.push(v);
                        }
                    }
                }
            }
        }
        out
    }

    /// The chunk that gives about `target` workgroups over the KV heads with at
    /// least `min_chunk` positions each, the splits of equal length (a multiple of 32
    /// positions; 0 for the single-pass kernel).
    pub fn chunk_for(spec: &AttentionSpec, target: u32, min_chunk: u32) -> u32 {
        if !spec.split {
            return 0;
        }
        let by_gpu = target.div_ceil(spec.kv_heads.max(1));
        let by_len = spec.context.div_ceil(min_chunk.max(1));
        let splits = by_gpu.min(by_len).max(1);
        spec.context
            .div_ceil(splits)
            .next_multiple_of(32)
            .clamp(CHUNKS[0], CHUNKS[CHUNKS.len() - 1])
    }
}

/// The default attention variant for `spec` here, and where it came from.
pub fn attention_default(
    spec: &AttentionSpec,
    caps: &VariantCaps,
    adapter: &AdapterReport,
) -> (AttentionVariant, String) {
    let family = Family::of(adapter);
    // Workgroups to fill the GPU: 16 of 128 threads per SM or CU (2048 threads, an
    // SM's most resident on NVIDIA's datacenter parts) where the adapter's size is
    // known (`AdapterReport::compute_units`), else a guess for a large GPU.
    let units = adapter.compute_units();
    let fill = |guess: u32| units.map_or(guess, |n| WORKGROUPS_PER_UNIT * n);
    let sized = match units {
        Some(n) => format!("{} workgroups for its {n} SMs/CUs", WORKGROUPS_PER_UNIT * n),
        None => "about 2048 workgroups (its size unknown)".into(),
    };
    let (v, note) = match family {
        Family::Cpu => (
            AttentionVariant {
                chunk: AttentionVariant::chunk_for(spec, 1024, 256),
                threads: 128,
                vec: 4,
                kv_together: false,
            },
            "default for CPU adapters: the layout CI's lavapipe figures were measured with (V after K: loading them together was 13% slower on lavapipe)".to_string(),
        ),
        Family::Nvidia => (
            AttentionVariant {
                chunk: AttentionVariant::chunk_for(spec, fill(2048), 64),
                threads: 128,
                vec: if spec.kv_dtype == Quant::F16 { 8 } else { 4 },
                kv_together: true,
            },
            format!("default for NVIDIA: enough splits for {sized}, 16-byte loads, K and V loaded together as llama.cpp does (a heuristic, not yet tuned on a GPU: run `tokenscope kernels --tune`)"),
        ),
        Family::OtherGpu => (
            AttentionVariant {
                chunk: AttentionVariant::chunk_for(spec, fill(1024), 64),
                threads: 128,
                vec: if spec.kv_dtype == Quant::F16 { 8 } else { 4 },
                kv_together: true,
            },
            format!("default for this GPU: enough splits for {}, a heuristic not measured on its vendor (run `tokenscope kernels --tune`)", if units.is_some() { sized.as_str() } else { "about 1024 workgroups (its size unknown)" }),
        ),
    };
    let v = if v.check(spec, caps).is_none() {
        v
    } else {
        // Fall back to the most portable layout (4 elements a load, 64 threads).
        AttentionVariant {
            threads: 64,
            vec: 4,
            ..v
        }
    };
    (v, note)
}

/// Workgroups of the default attention per SM or CU (128 threads each: 2048 threads).
pub const WORKGROUPS_PER_UNIT: u32 = 16;

impl std::fmt::Display for AttentionVariant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(context: u32, split: bool, kv: Quant) -> AttentionSpec {
        AttentionSpec {
            kv_dtype: kv,
            heads: 32,
            kv_heads: 8,
            head_dim: 128,
            context,
            split,
        }
    }

    const CAPS: VariantCaps = crate::kernels::NVIDIA_CAPS;

    #[test]
    fn names_round_trip() {
        for v in AttentionVariant::space(&spec(8192, true, Quant::F16), &CAPS) {
            assert_eq!(AttentionVariant::parse(&v.name()), Ok(v));
        }
        assert!(AttentionVariant::parse("c64_t128").is_err());
        assert!(AttentionVariant::parse("t128_c64_v4").is_err());
        assert!(AttentionVariant::parse("c64_t128_v4_xx").is_err());
        let kv = AttentionVariant::parse("c64_t128_v8_kv").unwrap();
        assert!(kv.kv_together && kv.name() == "c64_t128_v8_kv");
        assert!(!AttentionVariant::parse("c64_t128_v8").unwrap().kv_together);
        // Both ways of loading V are in the space, and one step apart.
        let space = AttentionVariant::space(&spec(8192, true, Quant::F16), &CAPS);
        assert!(space.iter().any(|v| v.kv_together) && space.iter().any(|v| !v.kv_together));
        assert!(kv.neighbours().contains(&AttentionVariant {
            kv_together: false,
            ..kv
        }));
    }

    #[test]
    fn the_space_follows_the_cache_format_and_the_kernel() {
        let f32s = AttentionVariant::space(&spec(8192, true, Quant::F32), &CAPS);
        assert!(f32s.iter().all(|v| v.vec == 4 && v.chunk > 0));
        let single = AttentionVariant::space(&spec(8192, false, Quant::F16), &CAPS);
        assert!(single.iter().all(|v| v.chunk == 0));
        assert!(single.iter().any(|v| v.vec == 8));
        // 300 tokens: chunks up to 512.
        let short = AttentionVariant::space(&spec(300, true, Quant::F16), &CAPS);
        assert_eq!(short.iter().map(|v| v.chunk).max(), Some(512));
        let v = AttentionVariant::parse("c256_t128_v8").unwrap();
        assert_eq!(v.lanes(&spec(8192, true, Quant::F16)), 4);
        assert_eq!(v.splits(&spec(8192, true, Quant::F16)), (32, 256));
        // 8 KV heads: 128 splits for 1024 workgroups, 64 positions each.
        assert_eq!(
            AttentionVariant::chunk_for(&spec(8192, true, Quant::F16), 1024, 64),
            64
        );
        assert_eq!(
            AttentionVariant::chunk_for(&spec(32768, true, Quant::F16), 1024, 64),
            256
        );
        // Short contexts: equal splits of at least the minimum (300 = 2 x 160).
        assert_eq!(
            AttentionVariant::chunk_for(&spec(300, true, Quant::F16), 1024, 256),
            160
        );
    }

    #[test]
    fn nvidia_splits_fill_the_adapters_sms() {
        let nvidia = |name: &str| AdapterReport {
            name: name.into(),
            backend: "vulkan".into(),
            device_type: "DiscreteGpu".into(),
            driver: "NVIDIA".into(),
            driver_info: String::new(),
            vendor_id: 0x10de,
            device_id: 0,
            subgroup_min_size: 32,
            subgroup_max_size: 32,
        };
        let s = spec(32768, true, Quant::F16);
        let splits = |name: &str| {
            let (v, note) = attention_default(&s, &CAPS, &nvidia(name));
            (v.splits(&s).0, note)
        };
        // H200: 16 x 132 = 2112 workgroups over 8 KV heads, 264 splits of 128.
        let (h200, note) = splits("NVIDIA H200");
        assert_eq!(h200, 256, "{note}");
        assert!(
            note.contains("2112 workgroups for its 132 SMs/CUs"),
            "{note}"
        );
        // L4: 16 x 58 = 928 workgroups, 116 splits: chunks of 288.
        let (l4, note) = splits("NVIDIA L4");
        assert!(l4 < h200 && l4 >= 100, "{l4} {note}");
        // Unknown size: the guess, and the note says so.
        let (_, note) = splits("NVIDIA Some Future GPU");
        assert!(note.contains("its size unknown"), "{note}");
    }
}
