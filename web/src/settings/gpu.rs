//! The view the page opens on, and the GPU view's settings, from the URL.

use super::query::form_decode;

/// The page's views.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum View {
    /// Benchmark an endpoint (the default).
    #[default]
    Bench,
    /// The GPU kernels, measured through WebGPU.
    Gpu,
    /// Real users: a chat with the RUM probe embedded, and the turns it collected.
    Rum,
    /// Quality: the endpoint's answers against a reference (`web-quality/`).
    Quality,
}

/// The view and the GPU view's settings, from the URL: `view=gpu` (or `rum`, `quality`),
/// `preset=quick|full`, `timestamps=0` (wall clock), `tune=1` (search the kernel
/// variants on this GPU first; `tune=10`: within 10 s, at most the page's 40), and
/// `autorun=1` (which starts the view the URL opens).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GpuSettings {
    /// The view the page opens on.
    pub view: View,
    /// The kernel preset.
    pub preset: tokenscope_render::page::gpu::GpuPreset,
    /// Allow timestamp queries (false: wall clock).
    pub timestamps: bool,
    /// Start the GPU run at once (`view=gpu&autorun=1`).
    pub autorun: bool,
    /// Search the variants first (`tune=1`).
    pub tune: bool,
    /// The search's budget, seconds (`tune=10`).
    pub tune_budget_s: Option<f64>,
}

impl GpuSettings {
    /// Reads the view's parameters; anything invalid is a note and ignored.
    pub fn from_query(query: &str) -> (GpuSettings, Vec<String>) {
        let mut s = GpuSettings {
            timestamps: true,
            ..GpuSettings::default()
        };
        let mut notes = Vec::new();
        let mut autorun = false;
        let query = query.strip_prefix('?').unwrap_or(query);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let value = form_decode(v);
            match form_decode(k).as_str() {
                "view" => match value.trim() {
                    "gpu" | "kernels" => s.view = View::Gpu,
                    "rum" | "users" => s.view = View::Rum,
                    "quality" => s.view = View::Quality,
                    "bench" | "benchmark" | "" => s.view = View::Bench,
                    other => notes.push(format!(
                        "view={other:?}: expected bench, gpu, rum or quality: ignored"
                    )),
                },
                "preset" => match value.parse() {
                    Ok(p) => s.preset = p,
                    Err(e) => notes.push(format!("{e}: ignored")),
                },
                "timestamps" => {
                    s.timestamps = !matches!(value.trim(), "0" | "false" | "no" | "off")
                }
                "autorun" => autorun = matches!(value.trim(), "1" | "true" | "yes" | "on" | ""),
                "tune" => match value.trim() {
                    "1" | "true" | "yes" | "on" | "" => s.tune = true,
                    "0" | "false" | "no" | "off" => s.tune = false,
                    v => match v.parse::<f64>() {
                        Ok(secs) if secs.is_finite() && secs > 0.0 => {
                            s.tune = true;
                            s.tune_budget_s = Some(secs);
                        }
                        _ => notes.push(format!(
                            "tune={v:?}: expected 1, 0 or a budget in seconds: ignored"
                        )),
                    },
                },
                _ => {}
            }
        }
        s.autorun = autorun && s.view == View::Gpu;
        (s, notes)
    }
}
