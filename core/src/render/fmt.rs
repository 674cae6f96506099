//! Numbers and text for people and for HTML: one formatter per kind of figure.

/// Format milliseconds for people: `0.42`, `12.3`, `420`, `1 234`.
pub fn fmt_ms(v: Option<f64>) -> String {
    match v {
        None => "-".to_owned(),
        Some(v) if v.abs() < 10.0 => format!("{v:.2}"),
        Some(v) if v.abs() < 100.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.0}"),
    }
}

/// Format a rate (tokens/s, req/s).
pub fn fmt_rate(v: f64) -> String {
    if v.abs() < 10.0 {
        format!("{v:.2}")
    } else if v.abs() < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// Format a byte size in binary units: `512 B`, `128.0 KiB`, `14.96 GiB`.
pub fn fmt_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{bytes} B"),
        _ if v < 100.0 => format!("{v:.2} {}", UNITS[unit]),
        _ => format!("{v:.1} {}", UNITS[unit]),
    }
}

/// Escape text for HTML and SVG content and attribute values; control characters
/// other than newline and tab are dropped (XML does not allow them).
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_formats() {
        assert_eq!(fmt_ms(Some(0.4234)), "0.42");
        assert_eq!(fmt_ms(Some(12.34)), "12.3");
        assert_eq!(fmt_ms(Some(420.4)), "420");
        assert_eq!(fmt_ms(None), "-");
        assert_eq!(fmt_rate(812.5), "812");
        assert_eq!(fmt_bytes(512), "512 B");
        assert_eq!(fmt_bytes(128 * 1024), "128.0 KiB");
        assert_eq!(fmt_bytes(1 << 30), "1.00 GiB");
        assert_eq!(fmt_bytes(16_060_000_000), "14.96 GiB");
    }
}
