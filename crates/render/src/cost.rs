//! What each token cost, per level: dollars (`--price`) and the GPUs' energy
//! (a GPU exporter), with what each figure assumes.

use tokenscope_core::model::cost::{EnergySource, Price};
use tokenscope_core::report::ClientReport;

type Table = (Vec<String>, Vec<Vec<String>>);

/// Dollars: cents, or three significant digits below a cent.
fn usd(x: f64) -> String {
    if x >= 100.0 {
        format!("${x:.0}")
    } else if x >= 0.01 || x <= 0.0 {
        format!("${x:.2}")
    } else {
        let decimals = (2.0 - x.log10().floor()) as usize;
        format!("${x:.decimals$}")
    }
}

fn opt(x: Option<f64>, f: impl Fn(f64) -> String) -> String {
    x.map_or_else(|| "-".into(), f)
}

/// One row per level that has a cost figure; `None` when none has.
pub fn cost_rows(report: &ClientReport) -> Option<Table> {
    let headers = [
        "load",
        "$ / M out tok",
        "$ / request",
        "energy (J)",
        "J / out tok",
        "out tok / J",
    ];
    let rows: Vec<Vec<String>> = report
        .levels
        .iter()
        .filter_map(|l| {
            let c = l.cost.as_ref()?;
            let energy = match c.energy_source {
                Some(EnergySource::PowerMean) => "~",
                _ => "",
            };
            Some(vec![
                l.label(),
                opt(c.usd_per_million_output_tokens, usd),
                opt(c.usd_per_request, usd),
                opt(c.energy_j, |j| format!("{energy}{j:.0}")),
                opt(c.joules_per_output_token, |j| format!("{energy}{j:.3}")),
                opt(c.output_tokens_per_joule, |t| format!("{energy}{t:.2}")),
            ])
        })
        .collect();
    (!rows.is_empty()).then(|| (headers.map(str::to_owned).to_vec(), rows))
}

/// What the table's figures assume, said under it.
pub fn cost_note(report: &ClientReport) -> Option<String> {
    let levels = &report.levels;
    if levels.iter().all(|l| l.cost.is_none()) {
        return None;
    }
    let mut parts = Vec::new();
    match report.config.price {
        Some(Price::GpuHour {
            usd_per_gpu_hour,
            gpus,
        }) => parts.push(format!(
            "dollars: {gpus} GPU(s) at ${usd_per_gpu_hour}/h over each level's window, idle time included, per successful request and output token"
        )),
        Some(Price::Tokens { .. }) => parts.push(format!(
            "dollars: each request's usage at {} per million tokens, per request the server reported usage for",
            report.config.price.map(|p| p.label()).unwrap_or_default()
        )),
        None => {}
    }
    let has = |s: EnergySource| {
        levels
            .iter()
            .any(|l| l.cost.as_ref().and_then(|c| c.energy_source) == Some(s))
    };
    if has(EnergySource::Counter) {
        parts.push("energy: the GPU exporter's energy counter over each level".into());
    }
    if has(EnergySource::PowerMean) {
        parts.push("~energy: the mean of the power scraped times the level's window".into());
    }
    parts.push("every figure assumes the GPUs served only this run".into());
    Some(format!("cost: {}", parts.join("; ")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn dollars_keep_three_digits_below_a_cent() {
        assert_eq!(super::usd(1234.5), "$1234");
        assert_eq!(super::usd(64.2), "$64.20");
        assert_eq!(super::usd(0.00103), "$0.00103");
        assert_eq!(super::usd(0.0), "$0.00");
    }
}
