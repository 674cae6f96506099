//! `collect --otlp URL`: the live figures ([`Metrics`]) sent as OTLP/HTTP JSON
//! (`ExportMetricsServiceRequest`, cumulative temporality) every interval and once
//! more at shutdown, to an OpenTelemetry Collector (`http://host:4318/v1/metrics`)
//! or any OTLP/HTTP receiver. Several collectors behind a load balancer each
//! send their own series (`service.instance.id`), which the backend adds up.
//!
//! The received side under GenAI's names (`gen_ai.client.operation.time_to_first_chunk`,
//! `gen_ai.client.operation.time_per_output_chunk`), the painted side under
//! `tokenscope.rum.*`. OTLP bucket counts are integers and a turn counts by its
//! (fractional) weight: each bucket's weight is rounded on its own, so no bucket's
//! count ever goes down between exports (the count is their sum). A failed send is
//! said once and counted; cumulative series mean the next send carries everything.

use std::time::Duration;

use serde_json::{Value, json};

use super::metrics::{FIGURES, Metrics};

/// Longest a send may take.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// Where and how to send.
#[derive(Debug, Clone)]
pub struct OtlpTarget {
    /// The OTLP/HTTP metrics URL.
    pub url: reqwest::Url,
    /// Extra headers (an authorization for the backend): sent, never printed.
    pub headers: Vec<(String, String)>,
    /// `service.instance.id`: this collector among several.
    pub instance: String,
}

/// The request body for `metrics` at `now_ns`, cumulative since `start_ns`.
pub fn request(metrics: &Metrics, start_ns: u64, now_ns: u64, instance: &str) -> Value {
    let str_attr = |k: &str, v: &str| json!({"key": k, "value": {"stringValue": v}});
    let attrs = |route: &str, browser: &str| {
        let (name, version) = browser.split_once(' ').unwrap_or((browser, ""));
        let mut a = vec![
            str_attr("http.route", route),
            str_attr("user_agent.name", name),
            str_attr("gen_ai.operation.name", "chat"),
        ];
        if !version.is_empty() {
            a.push(str_attr("user_agent.version", version));
        }
        a
    };
    let (start, now) = (start_ns.to_string(), now_ns.to_string());
    let mut out = Vec::new();
    for (i, fig) in FIGURES.iter().enumerate() {
        let points: Vec<Value> = metrics
            .series()
            .filter(|(_, s)| s.histograms[i].count() > 0.0)
            .map(|((route, browser), s)| {
                let h = &s.histograms[i];
                // Each bucket's weight rounded on its own: a bucket's count never
                // goes down from one export to the next (cumulative series).
                let rounded: Vec<u64> = h.buckets().iter().map(|w| w.round() as u64).collect();
                let total: u64 = rounded.iter().sum();
                let counts: Vec<String> = rounded.iter().map(u64::to_string).collect();
                json!({
                    "attributes": attrs(route, browser),
                    "startTimeUnixNano": start,
                    "timeUnixNano": now,
                    "count": total.to_string(),
                    "sum": h.sum_s(),
                    "bucketCounts": counts,
                    "explicitBounds": h.bounds_s(),
                })
            })
            .collect();
        if points.is_empty() {
            continue;
        }
        out.push(json!({
            "name": fig.otel,
            "unit": "s",
            "description": fig.help,
            "histogram": {"aggregationTemporality": 2, "dataPoints": points},
        }));
    }
    let turns: Vec<Value> = metrics
        .series()
        .flat_map(|((route, browser), s)| {
            s.outcomes.iter().map(move |(outcome, w)| {
                let mut a = attrs(route, browser);
                a.push(str_attr("tokenscope.rum.outcome", outcome));
                (a, *w)
            })
        })
        .map(|(a, w)| {
            json!({"attributes": a, "startTimeUnixNano": start, "timeUnixNano": now, "asDouble": w})
        })
        .collect();
    if !turns.is_empty() {
        out.push(json!({
            "name": "tokenscope.rum.turns",
            "unit": "{turn}",
            "description": "Turns they stand for (weighted), by outcome.",
            "sum": {"aggregationTemporality": 2, "isMonotonic": true, "dataPoints": turns},
        }));
    }
    json!({"resourceMetrics": [{
        "resource": {"attributes": [
            str_attr("service.name", "tokenscope-collect"),
            str_attr("service.version", env!("CARGO_PKG_VERSION")),
            str_attr("service.instance.id", instance),
        ]},
        "scopeMetrics": [{
            "scope": {"name": "tokenscope.rum", "version": env!("CARGO_PKG_VERSION")},
            "metrics": out,
        }],
    }]})
}

/// The export's HTTP client, from the one factory: a side client (no key of
/// ours, [`SEND_TIMEOUT`]), through the proxy the environment names for the
/// receiver's host (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, minus
/// `NO_PROXY`, as the bench reads them), never following a redirect (it would
/// carry the `--otlp-header`s elsewhere: a failed send, its status said).
pub fn client() -> anyhow::Result<reqwest::Client> {
    let options = tokenscope_loadgen::http_client::HttpOptions {
        proxy_rules: tokenscope_loadgen::http_client::proxy::ProxyRules::read(None, &|name| {
            std::env::var(name).ok()
        }),
        ..Default::default()
    };
    Ok(
        options.client(tokenscope_loadgen::http_client::ClientRole::Side {
            timeout: SEND_TIMEOUT,
        })?,
    )
}

/// Sends one request over [`client`]; the error says why without the URL or
/// the headers.
pub async fn send(
    client: &reqwest::Client,
    target: &OtlpTarget,
    body: &Value,
) -> Result<(), String> {
    let mut req = client
        .post(target.url.clone())
        .header("Content-Type", "application/json");
    for (k, v) in &target.headers {
        req = req.header(k, v);
    }
    let resp = req
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| tokenscope_loadgen::util::error_chain(&e.without_url()))?;
    tokenscope_loadgen::util::accepted(resp).await
}

/// Parses `--otlp-header NAME=VALUE`.
pub fn parse_header(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or("a header is NAME=VALUE (e.g. Authorization=Bearer ...)")?;
    let k = k.trim();
    if k.is_empty() || reqwest::header::HeaderName::from_bytes(k.as_bytes()).is_err() {
        return Err("the header's name is not a valid HTTP header name".into());
    }
    if reqwest::header::HeaderValue::from_str(v.trim()).is_err() {
        return Err(format!("the value of {k} is not a valid HTTP header value"));
    }
    Ok((k.to_owned(), v.trim().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;

    fn metrics() -> Metrics {
        let batch = r#"{"schema":"tokenscope.rum/1","turns":[
            {"route":"/api/chat","started_unix_ms":1.7e12,"ms":{"first_chunk":90,"first_dom":91,"first_paint":300},
             "chunks":3,"events":4,"chars":20,"paints":2,"chunks_merged":0,"stalls_250":0,"stalls_500":0,"stalls_1000":0,
             "longest_gap_ms":40,"longest_paint_gap_ms":45,"outcome":"complete","hidden":false,"restored":false,
             "paint_method":"raf+task","weight":3.5,"chunk_ms":[90,110,150]},
            {"route":"/api/chat","started_unix_ms":1.7e12,"ms":{"first_chunk":700},
             "chunks":1,"events":1,"chars":2,"paints":0,"chunks_merged":0,"stalls_250":0,"stalls_500":0,"stalls_1000":0,
             "longest_gap_ms":0,"longest_paint_gap_ms":0,"outcome":"aborted","hidden":true,"restored":false,
             "paint_method":"raf+task","weight":1}]}"#;
        let b: tokenscope_core::rum::Batch = serde_json::from_str(batch).unwrap();
        let mut m = Metrics::default();
        m.accepted("Chrome 131", &b.turns, 0);
        m
    }

    /// What we send reads back through OpenTelemetry's own OTLP types, with the
    /// weights in the counts.
    #[test]
    fn the_request_is_otlp_json_with_weighted_counts() {
        let body = request(&metrics(), 1_000, 2_000, "collector-1");
        let r: ExportMetricsServiceRequest = serde_json::from_value(body).unwrap();
        let rm = &r.resource_metrics[0];
        let metrics = &rm.scope_metrics[0].metrics;
        let by_name = |n: &str| metrics.iter().find(|m| m.name == n).unwrap();
        let Some(Data::Histogram(ttfc)) =
            &by_name("gen_ai.client.operation.time_to_first_chunk").data
        else {
            panic!("not a histogram")
        };
        let p = &ttfc.data_points[0];
        assert_eq!(ttfc.aggregation_temporality, 2);
        // 90 ms at weight 3.5 (rounds to 4) and 700 ms at weight 1.
        assert_eq!(p.count, 5);
        assert_eq!(p.bucket_counts.iter().sum::<u64>(), p.count);
        let le_0_1 = p.explicit_bounds.iter().position(|b| *b == 0.1).unwrap();
        assert_eq!(p.bucket_counts[le_0_1], 4, "{p:?}");
        assert!((p.sum.unwrap() - (0.09 * 3.5 + 0.7)).abs() < 1e-9);
        assert_eq!((p.start_time_unix_nano, p.time_unix_nano), (1_000, 2_000));
        let Some(Data::Histogram(tpoc)) =
            &by_name("gen_ai.client.operation.time_per_output_chunk").data
        else {
            panic!("not a histogram")
        };
        // Two gaps (20 and 40 ms, buckets of their own) of weight 3.5: 4 each.
        assert_eq!(tpoc.data_points[0].count, 8);
        let Some(Data::Sum(turns)) = &by_name("tokenscope.rum.turns").data else {
            panic!("not a sum")
        };
        assert!(turns.is_monotonic);
        assert_eq!(turns.data_points.len(), 2);
        // The painted side: only the visible turn.
        let Some(Data::Histogram(painted)) = &by_name("tokenscope.rum.time_to_first_paint").data
        else {
            panic!("not a histogram")
        };
        assert_eq!(painted.data_points[0].count, 4);
        let attrs: Vec<&str> = p.attributes.iter().map(|a| a.key.as_str()).collect();
        assert!(
            attrs.contains(&"http.route") && attrs.contains(&"user_agent.name"),
            "{attrs:?}"
        );
        let res: Vec<&str> = rm
            .resource
            .as_ref()
            .unwrap()
            .attributes
            .iter()
            .map(|a| a.key.as_str())
            .collect();
        assert!(res.contains(&"service.instance.id"), "{res:?}");
    }

    /// With fractional weights a bucket's count never goes down as turns come in
    /// (a running total rounded would take one from the bucket above).
    #[test]
    fn bucket_counts_only_grow() {
        let turn = |first_chunk: f64| {
            format!(
                r#"{{"route":"/a","started_unix_ms":1.7e12,"ms":{{"first_chunk":{first_chunk}}},"chunks":1,"events":1,
                "chars":2,"paints":0,"chunks_merged":0,"stalls_250":0,"stalls_500":0,"stalls_1000":0,"longest_gap_ms":0,
                "longest_paint_gap_ms":0,"outcome":"complete","hidden":false,"restored":false,"paint_method":"raf+task",
                "weight":3.3333}}"#
            )
        };
        let mut m = Metrics::default();
        let mut last: Vec<u64> = Vec::new();
        for first_chunk in [0.5, 3.0, 0.5, 3.0, 0.5, 0.5] {
            let b: tokenscope_core::rum::Batch = serde_json::from_str(&format!(
                r#"{{"schema":"tokenscope.rum/1","turns":[{}]}}"#,
                turn(first_chunk)
            ))
            .unwrap();
            m.accepted("Chrome 131", &b.turns, 0);
            let r: ExportMetricsServiceRequest =
                serde_json::from_value(request(&m, 1, 2, "c")).unwrap();
            let Some(Data::Histogram(h)) = &r.resource_metrics[0].scope_metrics[0].metrics[0].data
            else {
                panic!("not a histogram")
            };
            let now = h.data_points[0].bucket_counts.clone();
            assert!(
                last.is_empty() || now.iter().zip(&last).all(|(n, l)| n >= l),
                "{last:?} -> {now:?}"
            );
            last = now;
        }
    }

    #[test]
    fn headers_are_checked_and_never_echoed() {
        assert_eq!(
            parse_header("Authorization=Bearer abc").unwrap(),
            ("Authorization".into(), "Bearer abc".into())
        );
        let e = parse_header("Bad Name=secret-value").unwrap_err();
        assert!(!e.contains("secret-value"), "{e}");
        assert!(parse_header("no-equals").is_err());
    }
}
