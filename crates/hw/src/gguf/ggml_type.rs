//! ggml's tensor types: the id a GGUF file stores, the block each type packs and
//! its size, and the name ggml prints.
//!
//! The table follows ggml's `type_traits` (`ggml/src/ggml.c`) and gguf-py's
//! `GGML_QUANT_SIZES` (`gguf/constants.py`, gguf 0.19.0). Ids 4 and 5 (the removed
//! q4_2 / q4_3) and 31-33, 36-38 (the removed repacked `_4_4`/`_4_8`/`_8_8`
//! variants) are not types any more and read as unknown. It is the one table of
//! ggml's block sizes: the decode floor's `Quant` reads its own from here.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

macro_rules! ggml_types {
    ($( $(#[$doc:meta])* $variant:ident = $id:literal, $name:literal, $block:literal, $size:literal; )*) => {
        /// A ggml tensor type (`enum ggml_type`), as a GGUF tensor info stores it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[allow(non_camel_case_types)]
        pub enum GgmlType {
            $( $(#[$doc])* $variant, )*
        }

        impl GgmlType {
            /// Every type, in id order.
            pub const ALL: &'static [GgmlType] = &[$(GgmlType::$variant),*];

            /// The type with this id, if ggml defines one.
            pub fn from_id(id: u32) -> Option<GgmlType> {
                match id {
                    $( $id => Some(GgmlType::$variant), )*
                    _ => None,
                }
            }

            /// The id stored in the file.
            pub fn id(self) -> u32 {
                match self { $( GgmlType::$variant => $id, )* }
            }

            /// The name ggml prints (`q4_K`, `bf16`, `iq2_xxs`).
            pub fn name(self) -> &'static str {
                match self { $( GgmlType::$variant => $name, )* }
            }

            /// Elements per block (1 for the plain number types).
            pub fn block_elems(self) -> u64 {
                match self { $( GgmlType::$variant => $block, )* }
            }

            /// Bytes per block, scales included (ggml's `type_size`).
            pub fn block_bytes(self) -> u64 {
                match self { $( GgmlType::$variant => $size, )* }
            }

            /// The type ggml prints as `name` (case-sensitive, as ggml prints it).
            pub fn from_name(name: &str) -> Option<GgmlType> {
                match name {
                    $( $name => Some(GgmlType::$variant), )*
                    _ => None,
                }
            }
        }
    };
}

ggml_types! {
    /// IEEE f32.
    F32 = 0, "f32", 1, 4;
    /// IEEE f16.
    F16 = 1, "f16", 1, 2;
    /// 32 weights: f16 scale + 4-bit quants.
    Q4_0 = 2, "q4_0", 32, 18;
    /// 32 weights: f16 scale and min + 4-bit quants.
    Q4_1 = 3, "q4_1", 32, 20;
    /// 32 weights: f16 scale + 5-bit quants.
    Q5_0 = 6, "q5_0", 32, 22;
    /// 32 weights: f16 scale and min + 5-bit quants.
    Q5_1 = 7, "q5_1", 32, 24;
    /// 32 weights: f16 scale + 8-bit quants.
    Q8_0 = 8, "q8_0", 32, 34;
    /// 32 weights: f32 scale and sum + 8-bit quants (activations).
    Q8_1 = 9, "q8_1", 32, 40;
    /// K-quant, 2 bits.
    Q2_K = 10, "q2_K", 256, 84;
    /// K-quant, 3 bits.
    Q3_K = 11, "q3_K", 256, 110;
    /// K-quant, 4 bits.
    Q4_K = 12, "q4_K", 256, 144;
    /// K-quant, 5 bits.
    Q5_K = 13, "q5_K", 256, 176;
    /// K-quant, 6 bits.
    Q6_K = 14, "q6_K", 256, 210;
    /// K-quant, 8 bits (activations).
    Q8_K = 15, "q8_K", 256, 292;
    /// i-quant, 2.06 bits.
    IQ2_XXS = 16, "iq2_xxs", 256, 66;
    /// i-quant, 2.31 bits.
    IQ2_XS = 17, "iq2_xs", 256, 74;
    /// i-quant, 3.06 bits.
    IQ3_XXS = 18, "iq3_xxs", 256, 98;
    /// i-quant, 1.56 bits.
    IQ1_S = 19, "iq1_s", 256, 50;
    /// i-quant, 4.5 bits, blocks of 32.
    IQ4_NL = 20, "iq4_nl", 32, 18;
    /// i-quant, 3.44 bits.
    IQ3_S = 21, "iq3_s", 256, 110;
    /// i-quant, 2.5 bits.
    IQ2_S = 22, "iq2_s", 256, 82;
    /// i-quant, 4.25 bits.
    IQ4_XS = 23, "iq4_xs", 256, 136;
    /// 8-bit integer.
    I8 = 24, "i8", 1, 1;
    /// 16-bit integer.
    I16 = 25, "i16", 1, 2;
    /// 32-bit integer.
    I32 = 26, "i32", 1, 4;
    /// 64-bit integer.
    I64 = 27, "i64", 1, 8;
    /// IEEE f64.
    F64 = 28, "f64", 1, 8;
    /// i-quant, 1.75 bits.
    IQ1_M = 29, "iq1_m", 256, 56;
    /// bfloat16.
    BF16 = 30, "bf16", 1, 2;
    /// Ternary, 1.69 bits.
    TQ1_0 = 34, "tq1_0", 256, 54;
    /// Ternary, 2.06 bits.
    TQ2_0 = 35, "tq2_0", 256, 66;
    /// OCP microscaling FP4: 32 weights, e8m0 scale + 4-bit values.
    MXFP4 = 39, "mxfp4", 32, 17;
    /// NVIDIA FP4: 64 weights per block.
    NVFP4 = 40, "nvfp4", 64, 36;
    /// 1-bit, 128 weights per block.
    Q1_0 = 41, "q1_0", 128, 18;
}

impl GgmlType {
    /// Bytes of `elems` elements, or `None` when `elems` is not a whole number of
    /// blocks (or the product overflows).
    pub fn bytes_for(self, elems: u64) -> Option<u64> {
        if !elems.is_multiple_of(self.block_elems()) {
            return None;
        }
        (elems / self.block_elems()).checked_mul(self.block_bytes())
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for GgmlType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for GgmlType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        GgmlType::from_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown ggml type `{name}`")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_round_trip() {
        for &t in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(t.id()), Some(t));
            assert_eq!(GgmlType::from_name(t.name()), Some(t));
        }
        for gone in [4, 5, 31, 32, 33, 36, 37, 38, 42, u32::MAX] {
            assert_eq!(GgmlType::from_id(gone), None);
        }
        assert_eq!(GgmlType::Q4_K.name(), "q4_K");
        assert_eq!(GgmlType::from_id(30), Some(GgmlType::BF16));
        assert_eq!(serde_json::to_string(&GgmlType::Q6_K).unwrap(), "\"q6_K\"");
        assert_eq!(GgmlType::Q4_0.bytes_for(64), Some(36));
        assert_eq!(GgmlType::Q4_0.bytes_for(33), None);
    }
}
