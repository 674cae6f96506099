//! The GEMV variant space: the parameters of `shaders/gemv_driver.wgsl` that decide
//! speed on real GPUs, each variant a compile-time specialisation of the same WGSL file
//! per format. A variant is written `sg128_r2_u4_b1_q8`: team (`sg` one subgroup per
//! team, `wg` the whole workgroup) and threads per workgroup, rows per team, units in
//! flight per lane, batch columns per pass, and `_q8` when x is quantized to int8
//! (quantized formats only; llama.cpp's q8_1 path) or `_h` when the weights are
//! dequantized to f16 and meet x in f16 (the 4- and 5-bit formats with shader-f16;
//! llama.cpp's half-precision dequantization), and `_ur` when the driver's loops over
//! its register arrays are unrolled by the preprocessor.

use super::spec::GemvSpec;
use crate::kernels::VariantCaps;

/// Who sums a row's products: one subgroup, or the whole workgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Team {
    /// The workgroup strides the team's rows, then reduces through workgroup memory.
    Workgroup,
    /// One subgroup strides the team's rows and reduces with `subgroupAdd`: no
    /// workgroup memory, no barrier; `threads / subgroup size` teams per workgroup.
    Subgroup,
}

/// How x reaches the weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum XPath {
    /// f32, the weights dequantized to f32 in registers.
    F32,
    /// int8 in blocks of 32 (`shaders/quantize_x.wgsl`, once per activation), met
    /// by the weights' integer quants in `dot4I8Packed`.
    Q8,
    /// f16: each quant converted to f16 less the format's centre (8 or 16: exact),
    /// multiplied by x converted to f16 and summed in f16 per block (or K-quant run),
    /// the scale applied in f32 and the centre added back through x's sum where the
    /// format has a minimum (the 4- and 5-bit formats; needs shader-f16). llama.cpp
    /// ORs the nibbles into the mantissa of 1024.0h (0x6400), two weights an
    /// operation: naga cannot bitcast a u32 to vec2<f16> yet (gfx-rs/wgpu#8896). Its
    /// rounding is f16's, relative to the centred weights: the check's bound says so.
    F16,
}

/// The formats whose weights the [`XPath::F16`] path dequantizes: the 4- and 5-bit
/// blocks, whose quants less their centre are exact in f16 (q6_K and q8_0 take x as
/// f32 or int8, as in llama.cpp's integer paths).
pub fn f16_dequant_formats() -> [tokenscope_hw::floor::Quant; 6] {
    use tokenscope_hw::floor::Quant;
    [
        Quant::Q4_0,
        Quant::Q5_0,
        Quant::Q4_1,
        Quant::Q5_1,
        Quant::Q4K,
        Quant::Q5K,
    ]
}

/// Most copies of a unit's dot product an unrolled GEMV holds
/// ([`GemvVariant::can_unroll`]): unrolling all of them (up to 8 x 64) made
/// lavapipe's shader compiles run for minutes.
pub const MAX_UNROLLED: u32 = 16;

/// The order in which a unit's rows meet the batch columns (derived, not searched:
/// the one that keeps the fewest values live; `gemv_driver.wgsl`'s `add_unit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// x of every column first, each row unpacked once (few columns).
    XTile,
    /// Every row unpacked first, the columns streamed (many columns, small units).
    DeqRows,
    /// Row by row, x reloaded per row (many columns, units of 16 or 32 f32 x).
    RowByRow,
}

/// One point of the variant space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GemvVariant {
    /// Who reduces.
    pub team: Team,
    /// Threads per workgroup.
    pub threads: u32,
    /// Rows per team (x is loaded once for all of them).
    pub rows: u32,
    /// Units each lane loads before it uses any.
    pub unroll: u32,
    /// Batch columns per pass over a row (`rows * batch_tile` accumulators).
    pub batch_tile: u32,
    /// x as f32, int8 or f16.
    pub x: XPath,
    /// The driver's loops over its register arrays unrolled by the preprocessor
    /// (`_ur`, [`GemvVariant::can_unroll`]): every index into `w` and `acc` a
    /// constant, which keeps them in registers where a GPU compiler would spill an
    /// array indexed by a loop counter.
    pub unrolled: bool,
}

/// Most accumulators per thread (`rows * batch_tile`).
pub const MAX_ACC: u32 = 64;
/// Most units in flight per thread (`rows * unroll`).
pub const MAX_IN_FLIGHT: u32 = 16;
/// Largest values of the power-of-two parameters.
const MAX_ROWS: u32 = 8;
const MAX_UNROLL: u32 = 8;
const MAX_BATCH_TILE: u32 = 64;

impl GemvVariant {
    /// The variant's name (`sg128_r2_u4_b1_q8`).
    pub fn name(&self) -> String {
        let team = match self.team {
            Team::Workgroup => "wg",
            Team::Subgroup => "sg",
        };
        let x = match self.x {
            XPath::F32 => "",
            XPath::Q8 => "_q8",
            XPath::F16 => "_h",
        };
        let ur = if self.unrolled { "_ur" } else { "" };
        format!(
            "{team}{}_r{}_u{}_b{}{x}{ur}",
            self.threads, self.rows, self.unroll, self.batch_tile
        )
    }

    /// Parses a name written by [`GemvVariant::name`].
    pub fn parse(s: &str) -> Result<GemvVariant, String> {
        let bad = || {
            format!(
                "`{s}` is not a GEMV variant (expected e.g. sg128_r2_u4_b1_ur or wg256_r4_u1_b1_q8)"
            )
        };
        let (team, rest) = if let Some(r) = s.strip_prefix("sg") {
            (Team::Subgroup, r)
        } else if let Some(r) = s.strip_prefix("wg") {
            (Team::Workgroup, r)
        } else {
            return Err(bad());
        };
        let mut parts = rest.split('_');
        let num = |p: Option<&str>, prefix: &str| -> Result<u32, String> {
            p.and_then(|p| p.strip_prefix(prefix))
                .and_then(|n| n.parse().ok())
                .ok_or_else(bad)
        };
        let threads = num(parts.next(), "")?;
        let rows = num(parts.next(), "r")?;
        let unroll = num(parts.next(), "u")?;
        let batch_tile = num(parts.next(), "b")?;
        let mut next = parts.next();
        let x = match next {
            Some("q8") => XPath::Q8,
            Some("h") => XPath::F16,
            _ => XPath::F32,
        };
        if x != XPath::F32 {
            next = parts.next();
        }
        let unrolled = next == Some("ur");
        if unrolled {
            next = parts.next();
        }
        if next.is_some() {
            return Err(bad());
        }
        Ok(GemvVariant {
            team,
            threads,
            rows,
            unroll,
            batch_tile,
            x,
            unrolled,
        })
    }

    /// Teams per workgroup (1 for a workgroup team).
    pub fn teams(&self, caps: &VariantCaps) -> u32 {
        match self.team {
            Team::Workgroup => 1,
            Team::Subgroup => (self.threads / caps.subgroup_lanes()).max(1),
        }
    }

    /// Rows one workgroup computes.
    pub fn rows_per_workgroup(&self, caps: &VariantCaps) -> u32 {
        self.rows * self.teams(caps)
    }

    /// Threads that stride one row (the sequential steps of a thread's sum are the
    /// row's units over this): the workgroup, or the smallest subgroup.
    pub fn lanes_per_row(&self, caps: &VariantCaps) -> u32 {
        match self.team {
            Team::Workgroup => self.threads,
            Team::Subgroup => caps.subgroup_lanes(),
        }
    }

    /// How rows meet columns in this variant for `spec`.
    pub fn order(&self, spec: &GemvSpec) -> Order {
        if self.batch_tile <= self.rows {
            Order::XTile
        } else if self.x != XPath::Q8 && spec.vec() >= 16 {
            Order::RowByRow
        } else {
            Order::DeqRows
        }
    }

    /// Whether the driver's loops over its register arrays can be unrolled (`_ur`):
    /// in the default order (x of the pass's columns first) with at most
    /// [`MAX_UNROLLED`] copies of a unit's dot product.
    pub fn can_unroll(&self, spec: &GemvSpec) -> bool {
        self.order(spec) == Order::XTile
            && self.rows * self.batch_tile * self.unroll <= MAX_UNROLLED
    }

    /// Accumulators per thread.
    pub fn accumulators(&self) -> u32 {
        self.rows * self.batch_tile
    }

    /// Why this variant cannot run `spec` on a device with `caps` (None: it can).
    pub fn check(&self, spec: &GemvSpec, caps: &VariantCaps) -> Option<String> {
        let pow2 = |v: u32, max: u32| v.is_power_of_two() && v <= max;
        if !matches!(self.threads, 32 | 64 | 128 | 256) {
            return Some(format!("{} threads (32, 64, 128 or 256)", self.threads));
        }
        if self.threads > caps.max_threads {
            return Some(format!(
                "{} threads, the device allows {}",
                self.threads, caps.max_threads
            ));
        }
        if !pow2(self.rows, MAX_ROWS) || !pow2(self.unroll, MAX_UNROLL) {
            return Some("rows and unroll are powers of two up to 8".into());
        }
        // Any number of columns up to the batch (a power of two may exceed it: the
        // extra columns repeat the last one and are not stored).
        let bt_ok = self.batch_tile <= spec.batch
            || (self.batch_tile.is_power_of_two()
                && self.batch_tile <= spec.batch.next_power_of_two());
        if self.batch_tile == 0 || self.batch_tile > MAX_BATCH_TILE || !bt_ok {
            return Some(format!(
                "batch tile {} for batch {}",
                self.batch_tile, spec.batch
            ));
        }
        if self.accumulators() > MAX_ACC || self.rows * self.unroll > MAX_IN_FLIGHT {
            return Some(format!(
                "rows x batch tile <= {MAX_ACC} and rows x unroll <= {MAX_IN_FLIGHT}"
            ));
        }
        match self.team {
            Team::Subgroup if !caps.subgroups => {
                return Some("subgroup teams need subgroup operations".into());
            }
            Team::Subgroup if self.threads < caps.subgroup_lanes() => {
                return Some("fewer threads than one subgroup".into());
            }
            Team::Workgroup if self.threads < 64 => {
                return Some("workgroup teams use at least 64 threads".into());
            }
            _ => {}
        }
        let quantized = spec.dtype.block_elems() > 1;
        if self.x == XPath::Q8 && !quantized {
            return Some(format!("{} weights take x as f32", spec.dtype));
        }
        if self.unrolled && !self.can_unroll(spec) {
            return Some(format!(
                "unrolled: at most {MAX_UNROLLED} copies of a unit's dot product (rows x columns x units, {}) in the default order (columns at most rows)",
                self.rows * self.batch_tile * self.unroll
            ));
        }
        if self.x == XPath::F16 {
            if !f16_dequant_formats().contains(&spec.dtype) {
                return Some(format!(
                    "{} weights are not dequantized in f16 (the 4- and 5-bit formats are)",
                    spec.dtype
                ));
            }
            if !caps.shader_f16 {
                return Some("f16 dequantization needs shader-f16".into());
            }
        }
        None
    }

    /// The variants one step away: each parameter doubled or halved, the team and the
    /// x path switched (those that cannot run are left out by the caller).
    pub fn neighbours(&self) -> Vec<GemvVariant> {
        let mut out = Vec::new();
        let mut push = |v: GemvVariant| {
            if v != *self {
                out.push(v);
            }
        };
        for t in [self.threads / 2, self.threads * 2] {
            push(GemvVariant {
                threads: t,
                ..*self
            });
        }
        for r in [self.rows / 2, self.rows * 2] {
            push(GemvVariant { rows: r, ..*self });
        }
        for u in [self.unroll / 2, self.unroll * 2] {
            push(GemvVariant { unroll: u, ..*self });
        }
        for b in [self.batch_tile / 2, self.batch_tile * 2] {
            push(GemvVariant {
                batch_tile: b,
                ..*self
            });
        }
        push(GemvVariant {
            team: match self.team {
                Team::Workgroup => Team::Subgroup,
                Team::Subgroup => Team::Workgroup,
            },
            ..*self
        });
        for x in [XPath::F32, XPath::Q8, XPath::F16] {
            push(GemvVariant { x, ..*self });
        }
        push(GemvVariant {
            unrolled: !self.unrolled,
            ..*self
        });
        out
    }

    /// Every variant that can run `spec` here (the space the tuner searches and the
    /// tests verify).
    pub fn space(spec: &GemvSpec, caps: &VariantCaps) -> Vec<GemvVariant> {
        let mut out = Vec::new();
        for team in [Team::Workgroup, Team::Subgroup] {
            for threads in [32, 64, 128, 256] {
                for rows in [1, 2, 4, 8] {
                    for unroll in [1, 2, 4, 8] {
                        let mut tiles = vec![1, 2, 4, 8, 16, 32, 64];
                        if !tiles.contains(&spec.batch) && spec.batch <= 64 {
                            tiles.push(spec.batch);
                        }
                        for &batch_tile in &tiles {
                            for x in [XPath::F32, XPath::Q8, XPath::F16] {
                                for unrolled in [false, true] {
                                    let v = GemvVariant {
                                        team,
                                        threads,
                                        rows,
                                        unroll,
                                        batch_tile,
                                        x,
                                        unrolled,
                                    };
                                    if v.check(spec, caps).is_none() {
                                        out.push(v);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

impl std::fmt::Display for GemvVariant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenscope_hw::floor::Quant;

    fn spec(dtype: Quant, batch: u32) -> GemvSpec {
        GemvSpec {
            dtype,
            rows: 100,
            cols: 256,
            batch,
        }
    }

    const NV: VariantCaps = crate::kernels::NVIDIA_CAPS;

    #[test]
    fn names_round_trip_and_bad_ones_are_named() {
        for v in GemvVariant::space(&spec(Quant::Q4_0, 8), &NV) {
            assert_eq!(GemvVariant::parse(&v.name()), Ok(v));
        }
        for bad in [
            "",
            "xx128_r1_u1_b1",
            "sg128_r1_u1",
            "sg128_r1_u1_b1_q4",
            "sg_r1_u1_b1",
            "sg128_r1_u1_b1_ur_q8",
            "sg128_r1_u1_b1_q8_ur_ur",
        ] {
            let e = GemvVariant::parse(bad).unwrap_err();
            assert!(e.contains("not a GEMV variant"), "{e}");
        }
    }

    #[test]
    fn the_space_respects_the_device_and_the_format() {
        let f16 = GemvVariant::space(&spec(Quant::F16, 1), &NV);
        assert!(f16.iter().all(|v| v.x == XPath::F32 && v.batch_tile == 1));
        assert!(f16.iter().any(|v| v.team == Team::Subgroup));
        let no_sg = VariantCaps {
            subgroups: false,
            ..NV
        };
        let q4 = GemvVariant::space(&spec(Quant::Q4_0, 4), &no_sg);
        assert!(q4.iter().all(|v| v.team == Team::Workgroup));
        assert!(q4.iter().any(|v| v.x == XPath::Q8));
        // Many columns a pass: the order keeps one x live.
        let wide = q4
            .iter()
            .find(|v| v.batch_tile > v.rows && v.x == XPath::F32)
            .unwrap();
        assert_eq!(wide.order(&spec(Quant::Q4_0, 4)), Order::RowByRow);
        let small = VariantCaps {
            max_threads: 128,
            ..NV
        };
        assert!(
            GemvVariant::space(&spec(Quant::F32, 1), &small)
                .iter()
                .all(|v| v.threads <= 128)
        );
    }

    #[test]
    fn unrolling_is_bounded_and_one_step_away() {
        let s = spec(Quant::Q4_0, 1);
        let v = GemvVariant::parse("sg128_r2_u4_b1_q8_ur").unwrap();
        assert!(v.unrolled && v.x == XPath::Q8 && v.name() == "sg128_r2_u4_b1_q8_ur");
        assert!(v.check(&s, &NV).is_none());
        assert!(v.neighbours().contains(&GemvVariant {
            unrolled: false,
            ..v
        }));
        // 4 rows x 2 columns x 4 units: 32 copies, more than the bound.
        let big = GemvVariant::parse("sg128_r4_u4_b2_ur").unwrap();
        let e = big.check(&spec(Quant::Q4_0, 2), &NV).unwrap();
        assert!(e.contains("at most 16 copies"), "{e}");
        // Columns past the rows (another order): not unrolled.
        let wide = GemvVariant::parse("sg128_r1_u1_b4_ur").unwrap();
        assert!(wide.check(&spec(Quant::Q4_0, 4), &NV).is_some());
        let space = GemvVariant::space(&s, &NV);
        assert!(space.iter().any(|v| v.unrolled) && space.iter().any(|v| !v.unrolled));
        assert!(
            space
                .iter()
                .filter(|v| v.unrolled)
                .all(|v| v.can_unroll(&s))
        );
    }

    #[test]
    fn teams_and_lanes() {
        let v = GemvVariant::parse("sg128_r2_u4_b1").unwrap();
        assert_eq!(v.teams(&NV), 4);
        assert_eq!(v.rows_per_workgroup(&NV), 8);
        assert_eq!(v.lanes_per_row(&NV), 32);
        let w = GemvVariant::parse("wg256_r4_u1_b1").unwrap();
        assert_eq!((w.teams(&NV), w.rows_per_workgroup(&NV)), (1, 4));
        assert_eq!(w.lanes_per_row(&NV), 256);
        assert!(
            w.neighbours()
                .contains(&GemvVariant::parse("sg256_r4_u1_b1").unwrap())
        );
        assert!(
            w.neighbours()
                .contains(&GemvVariant::parse("wg256_r4_u1_b1_q8").unwrap())
        );
    }
}
