//! Charts as self-contained SVG strings, for the page and for `tokenscope report`'s
//! HTML: the throughput-latency curve of a sweep (knee and SLO bounds marked), CDFs
//! and histograms drawn from a level's quantile curves, the TTFT stage breakdown and a
//! per-request timeline.
//!
//! Pure functions: data in, a string out; no I/O, no clock (builds for wasm32). Every
//! chart is one `<svg>` element with a `viewBox` (it scales to its container), a
//! `<title>` and `<desc>` (its accessible name and description), presentation
//! attributes only (no `style` attribute, no CSS, no external font, no script: it
//! passes a strict Content-Security-Policy when inlined), and every text escaped.
//! Non-finite values are skipped, never written: the output never holds `NaN`.
//!
//! Distributions come as quantile curves (`LevelReport::quantiles`: 101 values, the
//! percentiles p0..p100). A CDF plots them directly; a histogram is derived from
//! them by linear interpolation between percentiles, so it is exact at percentile
//! resolution (1% of the samples) and says so in its description.

mod compare;
mod distribution;
mod kernels;
mod requests;
mod server;
mod svg;
mod sweep;
mod trend;

pub use compare::{RunCurve, throughput_latency_runs};
pub use distribution::{cdf, histogram_bins, histogram_from_quantiles};
pub use kernels::{kernel_roofline, roofline};
pub use requests::request_timeline;
pub use server::server_timeline;
pub use sweep::{throughput_latency, tpot_vs_floor, ttft_stages};
pub use trend::{TrendPoint, trend};

#[cfg(test)]
mod tests;
