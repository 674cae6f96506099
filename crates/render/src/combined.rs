//! The combined report rendered: Markdown ([`markdown`]), one self-contained HTML
//! document ([`html`]) and the HTML fragment the page inlines ([`html_body`]).

use std::fmt::Write as _;

use super::glossary::GLOSSARY;
use crate::fmt::{escape_html, fmt_ms, fmt_rate, fmt_sig3};
use crate::kernels::{FLOOR_AT_READ, FLOOR_WITH_KERNELS, floor_legend, floor_table};
use crate::table::{html_table, markdown_table};
use tokenscope_core::analyze::verdict::BELOW_FLOOR_RATIO;
use tokenscope_core::report::combined::{Combined, Comparison, FloorComparison, ReportInput};
use tokenscope_core::report::{ClientReport, Source};
use tokenscope_kernel_report::KernelReport;

fn level_rows(c: &ClientReport) -> (Vec<String>, Vec<Vec<String>>) {
    let browser = matches!(c.source, Source::Browser | Source::Rum);
    crate::client::level_table(
        c,
        crate::client::LevelColumns {
            painted: browser,
            render_delay: browser,
            delivery: c
                .levels
                .iter()
                .any(|l| l.metrics.browser_delivery_ms.is_some()),
            goodput: true,
            health: true,
            knee_marker: true,
        },
    )
}

/// The native-vs-browser table's rows (Markdown and HTML).
fn comparison_rows(cmp: &Comparison) -> Vec<Vec<String>> {
    cmp.stages
        .iter()
        .map(|s| {
            vec![
                s.stage.clone(),
                fmt_ms(s.native_ms),
                fmt_ms(s.browser_ms),
                s.delta_ms
                    .map(|d| format!("{d:+.1}"))
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect()
}

/// The TPOT-vs-floor paragraph (Markdown and HTML): the floor at the read
/// bandwidth beside the floor with these kernels, named as every table names them.
fn floor_sentence(f: &FloorComparison) -> String {
    let e = &f.floor.estimate;
    let read = match (f.floor.read_floor_ms, f.floor.read_gbps) {
        (Some(ms), Some(gbps)) => format!(
            "{FLOOR_AT_READ} {} ms ({} tok/s; every byte at the read bandwidth, {} GB/s); ",
            fmt_sig3(ms),
            fmt_sig3(1e3 / ms),
            fmt_sig3(gbps)
        ),
        _ => String::new(),
    };
    let against_read =
        f.floor
            .read_floor_ms
            .filter(|ms| *ms > 0.0)
            .map_or_else(String::new, |ms| {
                format!(
                    ", {} the {FLOOR_AT_READ}",
                    read_ratio_label(f.tpot_p50_ms / ms)
                )
            });
    format!(
        "{} on {}: {} bytes per token ({} weights + {} KV at {} context): {read}{FLOOR_WITH_KERNELS} {} ms ({} tok/s; GEMV {} GB/s ({}), attention {} GB/s ({})). Measured TPOT p50 {} ms at {}: {}x the {FLOOR_WITH_KERNELS}{against_read}. Floor: {}.",
        e.model,
        f.gpu,
        e.bytes_per_token,
        e.weight_bytes,
        e.kv_bytes,
        e.context,
        fmt_sig3(e.tpot_floor_ms),
        fmt_sig3(e.tokens_per_s_ceiling),
        fmt_sig3(e.gemv_gbps),
        f.floor.gemv_source,
        fmt_sig3(e.attention_gbps),
        f.floor.attention_source,
        fmt_ms(Some(f.tpot_p50_ms)),
        f.level,
        fmt_sig3(f.ratio),
        f.source
    )
}

/// The kernels report's decode floor table (both floors, as `tokenscope kernels`
/// shows it) with its legend, for the combined report.
fn kernel_floor_table(k: &KernelReport) -> Option<(Vec<String>, Vec<Vec<String>>, String)> {
    let (h, rows) = floor_table(k);
    (!rows.is_empty()).then(|| (h, rows, floor_legend(k.read_gbps())))
}

/// The report as Markdown.
// Sentences and headers the Markdown and the HTML renderings share.
const NOTHING_TO_CONCLUDE: &str = "Nothing to conclude: no level had a successful request.";

/// The verdict's line when it has no sentence: no client run given (a kernels
/// report alone says what it measured), or no successful request.
fn empty_verdict(input: &ReportInput) -> String {
    if !input.clients.is_empty() {
        return NOTHING_TO_CONCLUDE.to_owned();
    }
    match &input.kernels {
        Some(k) => format!(
            "No client run given (--client or --raw): nothing about serving to conclude. GPU kernels on {}: read ceiling {} GB/s, {} kernels, {} (below).",
            k.adapter.name,
            k.read_gbps()
                .map_or_else(|| "not measured".into(), fmt_sig3),
            k.kernels.len(),
            if k.verified {
                "every one matched its CPU reference"
            } else {
                "NOT every one matched its CPU reference"
            }
        ),
        None => {
            "No client run given (--client or --raw): nothing about serving to conclude.".into()
        }
    }
}
const NO_RULE_FIRED: &str = "No rule fired: none of the known symptoms is in the data.";
const ROUND_SPREAD_NOTE: &str = "Times in ms. Round spread: (max - min) / median of the rounds' E2E medians; ! = a round more than 2x off.";
const COMPARISON_HEADERS: [&str; 4] = ["stage", "native ms", "browser ms", "browser's own cost ms"];
const GLOSSARY_HEADERS: [&str; 3] = ["metric", "definition", "other tools"];

pub fn markdown(input: &ReportInput, c: &Combined) -> String {
    let mut out = String::from("# tokenscope report\n\n");
    let _ = writeln!(out, "{}\n", inputs_line(input));
    out.push_str("## Verdict\n\n");
    if c.verdict.is_empty() {
        let _ = writeln!(out, "{}", empty_verdict(input));
    }
    for v in &c.verdict {
        let _ = writeln!(out, "- {v}");
    }
    out.push_str("\n## Diagnosis\n\n");
    if c.findings.is_empty() {
        let _ = writeln!(out, "{NO_RULE_FIRED}");
    }
    for f in &c.findings {
        let _ = writeln!(out, "### {}\n", f.title);
        for e in &f.evidence {
            let _ = writeln!(out, "- {e}");
        }
        let _ = writeln!(out, "\n{}\n", f.advice);
    }
    for client in &input.clients {
        let _ = writeln!(
            out,
            "\n## Levels ({} client: {} at {})\n",
            client.source.as_str(),
            client.config.model,
            client.config.url
        );
        let (h, rows) = level_rows(client);
        out.push_str(&markdown_table(&h, &rows));
        let _ = writeln!(out, "\n{ROUND_SPREAD_NOTE}");
        super::client::server_markdown(&mut out, client);
    }
    if let Some(cmp) = &c.comparison {
        let _ = writeln!(out, "\n## Native vs browser ({}, p50)\n", cmp.level);
        let h = COMPARISON_HEADERS.map(str::to_owned);
        let rows = comparison_rows(cmp);
        out.push_str(&markdown_table(&h, &rows));
    }
    if let Some(f) = &c.floor {
        let _ = writeln!(out, "\n## TPOT vs the GPU floor\n\n{}", floor_sentence(f));
    }
    if let Some(p) = &c.kv_plan {
        let _ = writeln!(out, "\n## KV-cache plan ({})\n", kv_plan_title(p));
        out.push_str(&markdown_table(
            &kv_plan_headers(),
            &super::kv_plan::rows(p),
        ));
    }
    if let Some(k) = &input.kernels {
        let _ = writeln!(
            out,
            "\n## GPU kernels ({}, timing: {})\n",
            k.adapter.name,
            k.timing.label()
        );
        let (h, rows) = kernel_table(k);
        out.push_str(&markdown_table(&h, &rows));
        if let Some((h, rows, legend)) = kernel_floor_table(k) {
            out.push_str("\n### Decode floor (batch 1)\n\n");
            out.push_str(&markdown_table(&h, &rows));
            let _ = writeln!(out, "\n{legend}");
        }
    }
    if !c.notes.is_empty() {
        out.push_str("\n## Notes\n\n");
        for n in &c.notes {
            let _ = writeln!(out, "- {n}");
        }
    }
    let _ = writeln!(
        out,
        "\n## Glossary\n\n| {} |\n|---|---|---|",
        GLOSSARY_HEADERS.join(" | ")
    );
    for g in GLOSSARY {
        let _ = writeln!(out, "| {} | {} | {} |", g.name, g.definition, g.peers);
    }
    out
}

fn inputs_line(input: &ReportInput) -> String {
    let mut parts: Vec<String> = input
        .clients
        .iter()
        .map(|c| {
            format!(
                "{} client, {} at {}, {}{}",
                c.source.as_str(),
                c.config.model,
                c.config.url,
                c.environment
                    .started_at
                    .as_deref()
                    .unwrap_or("time not recorded"),
                if c.environment.simulated {
                    " (simulated endpoint)"
                } else {
                    ""
                }
            )
        })
        .collect();
    if let Some(k) = &input.kernels {
        parts.push(format!(
            "GPU kernels on {} ({}, {})",
            k.adapter.name, k.adapter.device_type, k.adapter.backend
        ));
    }
    if let Some(m) = &input.model {
        parts.push(format!(
            "model {} {} at {} context",
            m.shape.name, m.quant, m.context
        ));
    }
    format!("From: {}.", parts.join("; "))
}

/// A row of `headers` holding `cells` by column name, `-` elsewhere.
fn cells_row(headers: &[String], cells: &[(&str, String)]) -> Vec<String> {
    headers
        .iter()
        .map(|h| {
            cells
                .iter()
                .find(|(name, _)| name == h)
                .map_or_else(|| "-".to_owned(), |(_, v)| v.clone())
        })
        .collect()
}

/// The kernel table ([`super::kernels::kernel_table`]) with the bandwidth ceiling's
/// read and copy rows, and the compute roof's, on top.
fn kernel_table(k: &KernelReport) -> (Vec<String>, Vec<Vec<String>>) {
    let (headers, kernel_rows) = super::kernels::kernel_table(k);
    let mut rows = Vec::new();
    if let Some(b) = &k.bandwidth {
        let row = |name: &str, shape: String, gbps: f64, fraction: &str, verified: bool| {
            cells_row(
                &headers,
                &[
                    ("kernel", name.to_owned()),
                    ("shape", shape),
                    ("GB/s", fmt_rate(gbps)),
                    ("of read bw", fraction.to_owned()),
                    (
                        "verified",
                        super::kernels::verified_label(verified).to_owned(),
                    ),
                ],
            )
        };
        rows.push(row(
            "read (ceiling)",
            format!("{} MB", b.working_set_bytes / 1_000_000),
            b.read_gbps,
            "100%",
            b.read_verified,
        ));
        rows.push(row("copy", "-".into(), b.copy_gbps, "-", b.copy_verified));
    }
    if let Some(c) = &k.compute {
        rows.push(cells_row(
            &headers,
            &[
                ("kernel", "fma f32 (compute roof)".to_owned()),
                ("GFLOP/s", fmt_rate(c.f32_gflops)),
                ("of roof", "100% fma".to_owned()),
                (
                    "verified",
                    super::kernels::verified_label(c.verified).to_owned(),
                ),
            ],
        ));
    }
    rows.extend(kernel_rows);
    (headers, rows)
}

pub(crate) const CSS: &str = "body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1180px;padding:24px;color:#1d2330;background:#fff}h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:32px 0 8px;border-bottom:1px solid #d8dde6;padding-bottom:4px}h3{font-size:15px;margin:16px 0 4px}.from{color:#5a6478}.verdict li{font-size:15px;margin:6px 0}.finding{border-left:4px solid #d9822b;background:#fdf6ee;padding:8px 12px;margin:10px 0}.finding ul{margin:4px 0}.advice{color:#3c4658}table{border-collapse:collapse;margin:8px 0;font-variant-numeric:tabular-nums}th,td{border:1px solid #d8dde6;padding:3px 7px;text-align:right}th{background:#f3f5f9}td:first-child,th:first-child{text-align:left}.charts{display:flex;flex-wrap:wrap;gap:16px}.chart{flex:1 1 520px}.chart svg{max-width:100%;height:auto}.notes li{color:#5a6478}code{background:#f3f5f9;padding:0 3px}td.text{text-align:left}.table-wrap{overflow-x:auto;max-width:100%}";

/// What the HTML body holds beyond the analysis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyOptions {
    /// The client runs' own charts (throughput-latency, TTFT CDF, ITL histogram).
    /// The page leaves them out: it draws them above its analysis already.
    pub client_charts: bool,
}

impl Default for BodyOptions {
    fn default() -> Self {
        Self {
            client_charts: true,
        }
    }
}

/// The report as one self-contained HTML document: inline CSS and SVG, no
/// scripts, fonts, styles or images from anywhere else.
pub fn html(input: &ReportInput, c: &Combined) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>tokenscope report</title><style>{CSS}</style></head><body><h1>tokenscope report</h1>{}</body></html>\n",
        html_body(input, c, BodyOptions::default())
    )
}

/// The report's content as an HTML fragment (no document, no style): what
/// [`html`] wraps, and what the web page inlines in its own layout. Every text in
/// it is escaped; it holds no script and no style attribute (the page's
/// Content-Security-Policy allows neither).
pub fn html_body(input: &ReportInput, c: &Combined, opts: BodyOptions) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<p class=\"from\">{}</p>",
        escape_html(&inputs_line(input))
    );
    html_verdict_and_diagnosis(&mut o, c, &empty_verdict(input));
    let charts = charts(input, c, opts);
    if !charts.is_empty() {
        o.push_str("<h2 id=\"charts\">Charts</h2><div class=\"charts\">");
        for chart in charts {
            let _ = write!(o, "<figure class=\"chart\">{chart}</figure>");
        }
        o.push_str("</div>");
    }
    for client in &input.clients {
        let _ = write!(
            o,
            "<h2>Levels: {} client ({} at {})</h2>",
            client.source.as_str(),
            escape_html(&client.config.model),
            escape_html(&client.config.url)
        );
        let (h, rows) = level_rows(client);
        o.push_str(&html_table(&h, &rows));
        let _ = write!(
            o,
            "<p class=\"from\">{}</p>",
            escape_html(ROUND_SPREAD_NOTE)
        );
        html_server(&mut o, client);
    }
    if let Some(cmp) = &c.comparison {
        let _ = write!(
            o,
            "<h2 id=\"comparison\">Native vs browser ({}, p50)</h2>",
            escape_html(&cmp.level)
        );
        let h = COMPARISON_HEADERS.map(str::to_owned);
        let rows = comparison_rows(cmp);
        o.push_str(&html_table(&h, &rows));
        if let Some(p) = &cmp.browser_protocol {
            let _ = write!(
                o,
                "<p class=\"from\">Browser protocol: {}.</p>",
                escape_html(p)
            );
        }
    }
    if let Some(f) = &c.floor {
        let _ = write!(
            o,
            "<h2 id=\"floor\">TPOT vs the GPU floor</h2><p>{}</p>",
            escape_html(&floor_sentence(f))
        );
    }
    if let Some(p) = &c.kv_plan {
        let _ = write!(
            o,
            "<h2 id=\"kv-plan\">KV-cache plan ({})</h2>",
            escape_html(&kv_plan_title(p))
        );
        o.push_str(&html_table(&kv_plan_headers(), &super::kv_plan::rows(p)));
    }
    if let Some(k) = &input.kernels {
        let _ = write!(
            o,
            "<h2 id=\"kernels\">GPU kernels: {} ({}, timing: {})</h2>",
            escape_html(&k.adapter.name),
            escape_html(&k.adapter.device_type),
            k.timing.label()
        );
        let (h, rows) = kernel_table(k);
        o.push_str(&html_table(&h, &rows));
        if let Some((h, rows, legend)) = kernel_floor_table(k) {
            o.push_str("<h3 id=\"kernel-floor\">Decode floor (batch 1)</h3>");
            o.push_str(&html_table(&h, &rows));
            let _ = write!(o, "<p class=\"hint\">{}</p>", escape_html(&legend));
        }
    }
    if !c.notes.is_empty() {
        o.push_str("<h2>Notes</h2><ul class=\"notes\">");
        for n in &c.notes {
            let _ = write!(o, "<li>{}</li>", escape_html(n));
        }
        o.push_str("</ul>");
    }
    html_glossary(&mut o);
    o
}

/// A client's server view: resources and TTFT stages per level.
fn html_server(o: &mut String, client: &ClientReport) {
    use super::server;
    if let Some((h, rows)) = server::resource_rows(client) {
        o.push_str("<h3 id=\"server\">Server, per level</h3>");
        o.push_str(&html_table(&h, &rows));
    }
    if let Some((h, rows)) = server::stage_rows(client) {
        o.push_str("<h3 id=\"stages\">Where TTFT went (means, ms)</h3>");
        o.push_str(&html_table(&h, &rows));
    }
    if let Some((h, rows)) = super::cost::cost_rows(client) {
        o.push_str("<h3 id=\"cost\">What each token cost</h3>");
        o.push_str(&html_table(&h, &rows));
        if let Some(note) = super::cost::cost_note(client) {
            let _ = write!(o, "<p class=\"from\">{}</p>", escape_html(&note));
        }
    }
    if let Some((h, rows)) = super::answers::class_rows(client) {
        o.push_str("<h3 id=\"classes\">Goodput per class</h3>");
        o.push_str(&html_table(&h, &rows));
    }
    if let Some((h, rows)) = super::images::image_rows(client) {
        let _ = write!(o, "<h3 id=\"images\">{}</h3>", super::images::TITLE);
        o.push_str(&html_table(&h, &rows));
        if let Some(note) = super::images::image_note(client) {
            let _ = write!(o, "<p class=\"from\">{}</p>", escape_html(&note));
        }
    }
    if let Some((h, rows)) = super::answers::answer_rows(client) {
        o.push_str("<h3 id=\"answers\">What the answers were</h3>");
        o.push_str(&html_table(&h, &rows));
        if let Some(note) = super::answers::answer_note(client) {
            let _ = write!(o, "<p class=\"from\">{}</p>", escape_html(&note));
        }
    }
    if let Some((h, rows)) = super::turns::turn_rows(client) {
        o.push_str("<h3 id=\"turns\">Per conversation turn (ms)</h3>");
        o.push_str(&html_table(&h, &rows));
    }
    if let Some((h, rows)) = super::rum::rum_rows(client) {
        let _ = write!(o, "<h3 id=\"rum\">{}</h3>", escape_html(super::rum::TITLE));
        o.push_str(&html_table(&h, &rows));
        let _ = write!(o, "<p class=\"from\">{}</p>", escape_html(super::rum::NOTE));
    }
    if let Some(line) = server::source_line(client) {
        let _ = write!(o, "<p class=\"from\">{}</p>", escape_html(&line));
    }
}

fn kv_plan_title(p: &tokenscope_hw::floor::KvPlan) -> String {
    format!(
        "{}, weights {}, KV cache {}, {} tokens per sequence, on {}",
        p.model,
        p.input.weights,
        p.input.kv_dtype,
        p.input.context,
        super::fmt::fmt_bytes(p.input.gpu_memory_bytes)
    )
}

fn kv_plan_headers() -> Vec<String> {
    ["", "size", "how"].map(str::to_owned).to_vec()
}

/// The verdict's sentences and the diagnosis's findings, each with its evidence.
fn html_verdict_and_diagnosis(o: &mut String, c: &Combined, empty: &str) {
    o.push_str("<h2 id=\"verdict\">Verdict</h2><ul class=\"verdict\">");
    if c.verdict.is_empty() {
        let _ = write!(o, "<li>{}</li>", escape_html(empty));
    }
    for v in &c.verdict {
        let _ = write!(o, "<li>{}</li>", escape_html(v));
    }
    o.push_str("</ul><h2 id=\"diagnosis\">Diagnosis</h2>");
    if c.findings.is_empty() {
        let _ = write!(o, "<p>{NO_RULE_FIRED}</p>");
    }
    for f in &c.findings {
        let _ = write!(
            o,
            "<div class=\"finding\" data-rule=\"{}\"><h3>{}</h3><ul>",
            f.rule.as_str(),
            escape_html(&f.title)
        );
        for e in &f.evidence {
            let _ = write!(o, "<li>{}</li>", escape_html(e));
        }
        let _ = write!(
            o,
            "</ul><p class=\"advice\">{}</p></div>",
            escape_html(&f.advice)
        );
    }
}

/// The glossary table.
fn html_glossary(o: &mut String) {
    let _ = write!(
        o,
        "<h2 id=\"glossary\">Glossary</h2><div class=\"table-wrap\"><table><thead><tr>{}</tr></thead><tbody>",
        GLOSSARY_HEADERS.map(|h| format!("<th>{h}</th>")).concat()
    );
    for g in GLOSSARY {
        let _ = write!(
            o,
            "<tr><td>{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td></tr>",
            escape_html(g.name),
            escape_html(g.definition),
            escape_html(g.peers)
        );
    }
    o.push_str("</tbody></table></div>");
}

/// The charts of the HTML report, as inline SVG.
fn charts(input: &ReportInput, c: &Combined, opts: BodyOptions) -> Vec<String> {
    let mut out = Vec::new();
    if opts.client_charts {
        client_charts(input, &mut out);
    }
    // The server over the run (the first client that scraped it): the page draws
    // its own run's charts, not these, so they come with the report in both.
    if let Some(run) = input.clients.iter().find_map(ClientReport::server_run) {
        out.extend(crate::charts::server_timeline(run));
    }
    if let Some(f) = &c.floor
        && let Some(client) = input
            .clients
            .iter()
            .find(|cl| cl.source == Source::Native)
            .or(input.clients.first())
    {
        out.push(crate::charts::tpot_vs_floor(
            &client.levels,
            f.floor.estimate.tpot_floor_ms,
            &f.gpu,
        ));
    }
    if let Some(k) = &input.kernels {
        out.push(crate::charts::kernel_roofline(k));
        out.push(crate::charts::roofline(k));
    }
    out
}

fn read_ratio_label(r: f64) -> String {
    if r >= BELOW_FLOOR_RATIO {
        format!("{}x", fmt_sig3(r))
    } else {
        format!(
            "{}x (below: impossible for this model on this GPU)",
            fmt_sig3(r)
        )
    }
}

/// The charts of the client runs themselves: each sweep's throughput-latency
/// curve, the TTFT CDF at the lowest load (native vs browser, network vs painted),
/// and the first client's ITL histogram.
fn client_charts(input: &ReportInput, out: &mut Vec<String>) {
    // A sweep's curve (real users' levels are groups, not loads).
    for client in input.clients.iter().filter(|c| c.source != Source::Rum) {
        if client.levels.len() > 1 {
            out.push(crate::charts::throughput_latency(
                &client.levels,
                client.sweep.knee.as_ref(),
                &client.config.slos,
            ));
        }
    }
    // TTFT CDF at the lowest common load: native vs browser, network vs painted.
    let mut series: Vec<(String, Vec<f64>)> = Vec::new();
    for client in &input.clients {
        if let Some(l) = client.lowest_level() {
            if let Some(q) = l.quantiles.get("ttft_ms") {
                series.push((
                    format!("{} TTFT ({})", client.source.as_str(), l.label()),
                    q.clone(),
                ));
            }
            if let Some(q) = l.quantiles.get("rendered_ttft_ms") {
                series.push((
                    format!("{} painted TTFT ({})", client.source.as_str(), l.label()),
                    q.clone(),
                ));
            }
        }
    }
    if !series.is_empty() {
        let refs: Vec<(&str, &[f64])> = series
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect();
        out.push(crate::charts::cdf(&refs, "TTFT (ms)"));
    }
    if let Some(client) = input.clients.first()
        && let Some(l) = client.lowest_level()
        && let Some(q) = l.quantiles.get("itl_ms")
    {
        out.push(crate::charts::histogram_from_quantiles(
            q,
            30,
            &format!(
                "ITL (ms), {} client at {}",
                client.source.as_str(),
                l.label()
            ),
        ));
    }
}
