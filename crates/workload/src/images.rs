//! Synthetic images for prompts (`--images`): a count and a size per request,
//! encoded as PNG or JPEG, each request's own (a server that caches images by
//! their bytes never sees one twice).
//!
//! A vision model's prompt grows with the image's size (its patches), so its
//! prefill, and the time to the first token, with it. The pictures are smooth
//! gradients with a little noise: compressible as photographs are, so their
//! bytes on the wire are of the order a real photograph's would be.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use tokenscope_measure::openai::ImagePart;

/// The most images one request may carry.
pub const MAX_IMAGES: u32 = 16;
/// The largest side of an image, in pixels.
pub const MAX_SIDE_PX: u32 = 4096;

/// What one request carries: `count` images of `width_px` by `height_px`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ImageSpec {
    /// Images per request.
    pub count: u32,
    /// Width, pixels.
    pub width_px: u32,
    /// Height, pixels.
    pub height_px: u32,
}

impl fmt::Display for ImageSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.count != 1 {
            write!(f, "{}x", self.count)?;
        }
        write!(f, "{}x{}", self.width_px, self.height_px)
    }
}

/// Why an image spec was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageSpecError {
    /// Not `WxH` or `NxWxH`.
    #[error("'{0}' is not WIDTHxHEIGHT or COUNTxWIDTHxHEIGHT (e.g. 512x512, 2x1024x768)")]
    Shape(String),
    /// A side out of range.
    #[error("'{0}': each side must be 1 to {MAX_SIDE_PX} pixels")]
    Side(String),
    /// A count out of range.
    #[error("'{0}': a request carries 1 to {MAX_IMAGES} images")]
    Count(String),
}

impl FromStr for ImageSpec {
    type Err = ImageSpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let numbers: Vec<u32> = s
            .trim()
            .split(['x', 'X'])
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map_err(|_| ImageSpecError::Shape(s.to_owned()))?;
        let (count, width_px, height_px) = match numbers[..] {
            [w, h] => (1, w, h),
            [n, w, h] => (n, w, h),
            _ => return Err(ImageSpecError::Shape(s.to_owned())),
        };
        if !(1..=MAX_IMAGES).contains(&count) {
            return Err(ImageSpecError::Count(s.to_owned()));
        }
        if !(1..=MAX_SIDE_PX).contains(&width_px) || !(1..=MAX_SIDE_PX).contains(&height_px) {
            return Err(ImageSpecError::Side(s.to_owned()));
        }
        Ok(Self {
            count,
            width_px,
            height_px,
        })
    }
}

impl Serialize for ImageSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ImageSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// How images are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageFormat {
    /// JPEG, quality 85 (what cameras and phones send).
    #[default]
    Jpeg,
    /// PNG (lossless: several times a JPEG's bytes).
    Png,
}

impl ImageFormat {
    /// The media type.
    pub fn media_type(self) -> &'static str {
        match self {
            Self::Jpeg => "image/jpeg",
            Self::Png => "image/png",
        }
    }
}

/// The spec the `index`-th request of a client (or shard) carries, when its
/// prompts come in a cycle of `prompts` (1: every prompt its own): each spec
/// in turn, moved on by one each time the prompts start again, so that every
/// spec goes with every prompt alike (with 2 prompts and 2 specs, a spec in
/// plain turn would go with one prompt only, and its TTFT would be that
/// prompt's as much as its images').
pub fn spec_for(specs: &[ImageSpec], index: u64, prompts: u64) -> Option<ImageSpec> {
    let prompts = prompts.max(1);
    let turn = index % prompts + index / prompts;
    (!specs.is_empty()).then(|| specs[(turn % specs.len() as u64) as usize])
}

/// The specs a pre-flight sends, so that a server's limits show before the
/// run: the one with the most images (then the most pixels), and the one
/// with the largest image (then the most images) where that is another.
pub fn extremes(specs: &[ImageSpec]) -> Vec<ImageSpec> {
    let pixels = |s: &ImageSpec| u64::from(s.width_px) * u64::from(s.height_px);
    let most = specs.iter().copied().max_by_key(|s| (s.count, pixels(s)));
    let biggest = specs.iter().copied().max_by_key(|s| (pixels(s), s.count));
    let mut out: Vec<ImageSpec> = most.into_iter().collect();
    out.extend(biggest.filter(|b| Some(*b) != most));
    out
}

/// Request `global`'s images: `spec.count` pictures of its size, each its own
/// (from `seed`, the request and the image's place), encoded as `format`.
pub fn request_images(
    spec: ImageSpec,
    format: ImageFormat,
    seed: u64,
    global: u64,
) -> Vec<ImagePart> {
    (0..spec.count)
        .map(|k| {
            let salt = seed ^ global.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (u64::from(k) << 48);
            let bytes = encode(spec.width_px, spec.height_px, format, salt);
            ImagePart {
                media_type: format.media_type(),
                base64: base64::engine::general_purpose::STANDARD.encode(bytes),
            }
        })
        .collect()
}

/// One picture of `width` by `height`, RGB, from `salt`: a gradient whose
/// direction and colours come from the salt, with a little noise.
pub fn pixels(width: u32, height: u32, salt: u64) -> Vec<u8> {
    // splitmix64 of the salt: nearby salts give unrelated pictures.
    let mut state = {
        let mut z = salt.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) | 1
    };
    let mut next = move || {
        // xorshift64*: fast, and enough for noise.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let base = next();
    let channel = |i: u32| ((base >> (i * 8)) & 0xFF) as f32;
    let (w, h) = (width.max(1) as f32, height.max(1) as f32);
    let mut out = Vec::with_capacity(width as usize * height as usize * 3);
    for y in 0..height {
        for x in 0..width {
            let (u, v) = (x as f32 / w, y as f32 / h);
            let noise = next();
            for c in 0..3u32 {
                let along = match c {
                    0 => u,
                    1 => v,
                    _ => (u + v) / 2.0,
                };
                let jitter = ((noise >> (c * 8)) & 0x0F) as f32 - 7.5;
                let value = channel(c) * (1.0 - along) + channel(c + 3) * along + jitter;
                out.push(value.clamp(0.0, 255.0) as u8);
            }
        }
    }
    out
}

/// [`pixels`] encoded as `format`.
pub fn encode(width: u32, height: u32, format: ImageFormat, salt: u64) -> Vec<u8> {
    let rgb = pixels(width, height, salt);
    let mut out = Vec::new();
    match format {
        ImageFormat::Png => {
            let mut e = png::Encoder::new(&mut out, width, height);
            e.set_color(png::ColorType::Rgb);
            e.set_depth(png::BitDepth::Eight);
            e.set_compression(png::Compression::Fast);
            let mut w = e.write_header().expect("writing to a Vec cannot fail");
            w.write_image_data(&rgb)
                .expect("the data is width x height x 3");
        }
        ImageFormat::Jpeg => {
            // JPEG's sides are u16: MAX_SIDE_PX keeps them in range.
            let e = jpeg_encoder::Encoder::new(&mut out, 85);
            e.encode(
                &rgb,
                u16::try_from(width).unwrap_or(u16::MAX),
                u16::try_from(height).unwrap_or(u16::MAX),
                jpeg_encoder::ColorType::Rgb,
            )
            .expect("the data is width x height x 3");
        }
    }
    out
}

/// An image's width and height from its header (PNG's IHDR, JPEG's start of
/// frame), without decoding it; `None` for anything else.
pub fn dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n";
    if bytes.starts_with(PNG) {
        let ihdr = bytes.get(12..24)?;
        if &ihdr[..4] != b"IHDR" {
            return None;
        }
        let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        return Some((be(&ihdr[4..8]), be(&ihdr[8..12])));
    }
    if !bytes.starts_with(&[0xFF, 0xD8]) {
        return None;
    }
    // Walk the markers to the first start of frame (SOF0-SOF15 but DHT, JPG, DAC).
    let mut i = 2;
    while i + 4 <= bytes.len() {
        if bytes[i] != 0xFF {
            return None;
        }
        let marker = bytes[i + 1];
        if marker == 0xFF {
            i += 1;
            continue;
        }
        let len = usize::from(u16::from_be_bytes([bytes[i + 2], bytes[i + 3]]));
        if (0xC0..=0xCF).contains(&marker) && !matches!(marker, 0xC4 | 0xC8 | 0xCC) {
            let frame = bytes.get(i + 5..i + 9)?;
            let h = u32::from(u16::from_be_bytes([frame[0], frame[1]]));
            let w = u32::from(u16::from_be_bytes([frame[2], frame[3]]));
            return Some((w, h));
        }
        i += 2 + len;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_print_and_refuse() {
        let s: ImageSpec = "512x384".parse().unwrap();
        assert_eq!((s.count, s.width_px, s.height_px), (1, 512, 384));
        assert_eq!(s.to_string(), "512x384");
        let s: ImageSpec = "2x1024x768".parse().unwrap();
        assert_eq!((s.count, s.width_px, s.height_px), (2, 1024, 768));
        assert_eq!(s.to_string(), "2x1024x768");
        for bad in [
            "512", "axb", "0x512", "512x0", "17x64x64", "64x5000", "1x2x3x4", "",
        ] {
            assert!(bad.parse::<ImageSpec>().is_err(), "{bad}");
        }
        assert!(matches!(
            "64x5000".parse::<ImageSpec>(),
            Err(ImageSpecError::Side(_))
        ));
    }

    #[test]
    fn each_request_takes_the_next_spec() {
        let specs: Vec<ImageSpec> = ["64x64", "128x96"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let got = |prompts: u64| -> Vec<String> {
            (0..8)
                .map(|g| spec_for(&specs, g, prompts).unwrap().to_string())
                .collect()
        };
        // Synthetic prompts (each its own): the specs in turn.
        assert_eq!(got(1), ["64x64", "128x96"].repeat(4));
        // Two prompts in turn: each prompt gets each spec.
        assert_eq!(got(2), ["64x64", "128x96", "128x96", "64x64"].repeat(2));
        // Three prompts and two specs: over six requests each pair once.
        let pairs: std::collections::BTreeSet<(u64, String)> = (0..6)
            .map(|g| (g % 3, spec_for(&specs, g, 3).unwrap().to_string()))
            .collect();
        assert_eq!(pairs.len(), 6);
        assert_eq!(spec_for(&[], 3, 1), None);
        let extremes_of = |list: &[&str]| -> Vec<String> {
            let specs: Vec<ImageSpec> = list.iter().map(|s| s.parse().unwrap()).collect();
            extremes(&specs).iter().map(ToString::to_string).collect()
        };
        assert_eq!(
            extremes_of(&["1024x1024", "2x64x64", "2x128x96"]),
            ["2x128x96", "1024x1024"]
        );
        assert_eq!(extremes_of(&["64x64", "2x128x96"]), ["2x128x96"]);
        assert!(extremes_of(&[]).is_empty());
    }

    /// Odd sizes, both formats: the header says the size asked, a PNG decodes to
    /// the very pixels, and no two requests' images are the same.
    #[test]
    fn images_have_their_size_and_are_each_requests_own() {
        for (w, h) in [(1, 1), (17, 9), (333, 101)] {
            for format in [ImageFormat::Png, ImageFormat::Jpeg] {
                let bytes = encode(w, h, format, 7);
                assert_eq!(dimensions(&bytes), Some((w, h)), "{format:?} {w}x{h}");
            }
            let png = encode(w, h, ImageFormat::Png, 7);
            let mut reader = png::Decoder::new(std::io::Cursor::new(png))
                .read_info()
                .unwrap();
            let mut buf = vec![0; reader.output_buffer_size().unwrap()];
            let info = reader.next_frame(&mut buf).unwrap();
            assert_eq!(&buf[..info.buffer_size()], pixels(w, h, 7).as_slice());
        }
        let spec: ImageSpec = "2x32x32".parse().unwrap();
        let a = request_images(spec, ImageFormat::Jpeg, 1, 0);
        let b = request_images(spec, ImageFormat::Jpeg, 1, 1);
        assert_eq!(a.len(), 2);
        assert_ne!(a[0], a[1], "two images of one request");
        assert_ne!(a[0], b[0], "two requests");
        assert_eq!(a, request_images(spec, ImageFormat::Jpeg, 1, 0), "seeded");
        assert_ne!(pixels(8, 8, 2), pixels(8, 8, 3), "neighbouring salts");
        assert_eq!(a[0].media_type, "image/jpeg");
        assert!(a[0].data_url().starts_with("data:image/jpeg;base64,/9j/"));
    }

    #[test]
    fn dimensions_refuse_what_is_not_an_image() {
        assert_eq!(dimensions(b""), None);
        assert_eq!(dimensions(b"GIF89a......"), None);
        assert_eq!(dimensions(&[0xFF, 0xD8, 0xFF]), None);
        assert_eq!(dimensions(b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHD"), None);
    }
}
