//! A level's requests per image spec (`--images`): sent, successful, the
//! server's prompt tokens, the images' share of them, and the time to the
//! first token, so that TTFT can be read against image size.

use std::collections::BTreeMap;

use tokenscope_stats::stats::percentile_sorted;

use crate::model::ImageGroup;

#[derive(Debug, Clone, Default)]
struct Group {
    sent: u64,
    ok: u64,
    /// Sum and count of the server's prompt tokens.
    prompt_tokens: (f64, u64),
    /// Sum and count of the images' tokens.
    image_tokens: (f64, u64),
    ttft_ms: Vec<f64>,
}

/// A level's requests per image spec.
#[derive(Debug, Clone, Default)]
pub(crate) struct ImagesAcc {
    by_spec: BTreeMap<String, Group>,
}

/// What one successful request with images measured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ImageSample {
    pub(crate) prompt_tokens: Option<u64>,
    pub(crate) image_tokens: Option<i64>,
    pub(crate) ttft_ms: Option<f64>,
}

impl ImagesAcc {
    /// A measured request carrying `spec` was sent.
    pub(crate) fn sent(&mut self, spec: &str) {
        self.entry(spec).sent += 1;
    }

    /// A successful request carrying `spec`.
    pub(crate) fn ok(&mut self, spec: &str, s: ImageSample) {
        let g = self.entry(spec);
        g.ok += 1;
        if let Some(t) = s.prompt_tokens {
            g.prompt_tokens.0 += t as f64;
            g.prompt_tokens.1 += 1;
        }
        if let Some(t) = s.image_tokens {
            g.image_tokens.0 += t as f64;
            g.image_tokens.1 += 1;
        }
        g.ttft_ms.extend(s.ttft_ms);
    }

    fn entry(&mut self, spec: &str) -> &mut Group {
        if !self.by_spec.contains_key(spec) {
            self.by_spec.insert(spec.to_owned(), Group::default());
        }
        self.by_spec.get_mut(spec).expect("inserted")
    }

    /// One group per spec seen, smallest first (by pixels sent).
    pub(crate) fn finish(self) -> Vec<ImageGroup> {
        let mean = |(sum, n): (f64, u64)| (n > 0).then(|| sum / n as f64);
        let mut out: Vec<ImageGroup> = self
            .by_spec
            .into_iter()
            .map(|(images, mut g)| {
                g.ttft_ms.sort_by(f64::total_cmp);
                let n = g.ttft_ms.len();
                ImageGroup {
                    images,
                    sent: g.sent,
                    ok: g.ok,
                    prompt_tokens_mean: mean(g.prompt_tokens),
                    image_tokens_mean: mean(g.image_tokens),
                    ttft_ms_p50: (n > 0).then(|| percentile_sorted(&g.ttft_ms, 0.5)),
                    ttft_ms_p90: (n >= 10).then(|| percentile_sorted(&g.ttft_ms, 0.9)),
                }
            })
            .collect();
        out.sort_by_key(|g| (pixels(&g.images), g.images.clone()));
        out
    }
}

/// The pixels a spec's label sends (count x width x height), for ordering.
fn pixels(label: &str) -> u64 {
    label
        .split('x')
        .map(|n| n.parse::<u64>().unwrap_or(0))
        .product()
}

/// Shards' summaries of one level's image groups: the counts summed. The
/// means and percentiles cannot be merged from summaries (how many requests
/// each mean stands for is not kept) and are left out; a merge from raw files
/// has them.
pub fn merge_images(parts: &[&[ImageGroup]]) -> Vec<ImageGroup> {
    let mut by: BTreeMap<String, ImageGroup> = BTreeMap::new();
    for g in parts.iter().flat_map(|p| p.iter()) {
        let e = by.entry(g.images.clone()).or_insert_with(|| ImageGroup {
            images: g.images.clone(),
            sent: 0,
            ok: 0,
            prompt_tokens_mean: None,
            image_tokens_mean: None,
            ttft_ms_p50: None,
            ttft_ms_p90: None,
        });
        e.sent += g.sent;
        e.ok += g.ok;
    }
    let mut out: Vec<ImageGroup> = by.into_values().collect();
    out.sort_by_key(|g| (pixels(&g.images), g.images.clone()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(prompt: u64, image: i64, ttft: f64) -> ImageSample {
        ImageSample {
            prompt_tokens: Some(prompt),
            image_tokens: Some(image),
            ttft_ms: Some(ttft),
        }
    }

    #[test]
    fn groups_by_spec_smallest_first_with_their_own_figures() {
        let mut acc = ImagesAcc::default();
        for i in 0..12 {
            acc.sent("1024x1024");
            acc.ok("1024x1024", sample(1400, 1369, 100.0 + f64::from(i)));
        }
        acc.sent("64x64");
        acc.sent("64x64");
        acc.ok("64x64", sample(40, 9, 20.0));
        let g = acc.finish();
        assert_eq!(g[0].images, "64x64", "by pixels, not by name");
        assert_eq!((g[0].sent, g[0].ok), (2, 1));
        assert_eq!(g[0].image_tokens_mean, Some(9.0));
        assert_eq!(g[0].ttft_ms_p90, None, "one request carries no p90");
        assert_eq!(g[1].prompt_tokens_mean, Some(1400.0));
        assert_eq!(g[1].ttft_ms_p50, Some(105.5));
        assert!(g[1].ttft_ms_p90.is_some());
    }

    #[test]
    fn shards_merge_counts_only() {
        let group = |ok, image| ImageGroup {
            images: "64x64".into(),
            sent: ok,
            ok,
            prompt_tokens_mean: Some(image + 10.0),
            image_tokens_mean: Some(image),
            ttft_ms_p50: Some(1.0),
            ttft_ms_p90: None,
        };
        let (a, b) = ([group(1, 10.0)], [group(3, 30.0)]);
        let m = merge_images(&[&a, &b]);
        assert_eq!((m[0].sent, m[0].ok), (4, 4));
        assert_eq!(
            (
                m[0].image_tokens_mean,
                m[0].prompt_tokens_mean,
                m[0].ttft_ms_p50
            ),
            (None, None, None)
        );
    }
}
