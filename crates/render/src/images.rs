//! TTFT against image size (`--images`): per level and image spec, the
//! server's prompt tokens, the images' share of them, and the time to the
//! first token.

use tokenscope_core::report::ClientReport;

type Table = (Vec<String>, Vec<Vec<String>>);

/// The table's title.
pub const TITLE: &str = "TTFT against image size";

/// One row per level and image spec; `None` when no request carried images.
pub fn image_rows(report: &ClientReport) -> Option<Table> {
    let headers = [
        "load",
        "images",
        "sent",
        "ok",
        "prompt tokens",
        "image tokens",
        "TTFT p50",
        "TTFT p90",
    ];
    let opt =
        |x: Option<f64>, unit: &str| x.map_or_else(|| "-".into(), |v| format!("{v:.1}{unit}"));
    let rows: Vec<Vec<String>> = report
        .levels
        .iter()
        .flat_map(|l| {
            l.images.iter().map(|g| {
                vec![
                    l.label(),
                    g.images.clone(),
                    g.sent.to_string(),
                    g.ok.to_string(),
                    opt(g.prompt_tokens_mean, ""),
                    opt(g.image_tokens_mean, ""),
                    opt(g.ttft_ms_p50, " ms"),
                    opt(g.ttft_ms_p90, " ms"),
                ]
            })
        })
        .collect();
    (!rows.is_empty()).then(|| (headers.map(str::to_owned).to_vec(), rows))
}

/// What the table's columns are, said under it.
pub fn image_note(report: &ClientReport) -> Option<String> {
    if report.config.images.is_empty() {
        return None;
    }
    let format = report.config.image_format.map_or("", |f| f.media_type());
    let counted = report.config.tokens.as_ref().is_some_and(|t| t.exact);
    Some(format!(
        "images: what each request carried ({format}, each request's own, each size in turn); prompt tokens: the server's usage, mean; image tokens: that less the text's counted tokens and the template's overhead{}; TTFT p90 from 10 requests of a size",
        if counted {
            ""
        } else {
            " (- here: the text was not counted exactly; give --tokenizer, or a server with /tokenize)"
        }
    ))
}
