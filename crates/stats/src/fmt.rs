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

/// A figure to three significant digits for reading (`0.0423`, `64.0`, `352`,
/// `8880`), never `0` or `0.0` when it is not zero: the kernels report's
/// milliseconds and tokens/s. `-` for a value that is not finite.
pub fn fmt_sig3(v: f64) -> String {
    if !v.is_finite() {
        return "-".to_owned();
    }
    if v == 0.0 {
        return "0".to_owned();
    }
    // Digits left of the point once rounded to three significant digits.
    let magnitude = v.abs().log10().floor() as i32;
    let decimals = (2 - magnitude).max(0) as usize;
    let rounded = format!("{v:.decimals$}");
    // Rounding may carry into one more digit (9.996 -> 10.00): one decimal fewer.
    let digits = rounded.trim_start_matches('-').replace('.', "");
    let significant = digits.trim_start_matches('0').len();
    if significant > 3 && decimals > 0 {
        return format!("{v:.prec$}", prec = decimals - 1);
    }
    if decimals == 0 && magnitude > 2 {
        // 8882.047 -> 8880: the digits past the third are noise for reading.
        let step = 10f64.powi(magnitude - 2);
        return format!("{:.0}", (v / step).round() * step);
    }
    rounded
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

    #[test]
    fn three_significant_digits_and_never_zero() {
        assert_eq!(fmt_sig3(8882.047), "8880");
        assert_eq!(fmt_sig3(351.97), "352");
        assert_eq!(fmt_sig3(64.03), "64.0");
        assert_eq!(fmt_sig3(7.149), "7.15");
        assert_eq!(fmt_sig3(9.996), "10.0");
        assert_eq!(fmt_sig3(99.96), "100");
        assert_eq!(fmt_sig3(0.1126), "0.113");
        assert_eq!(fmt_sig3(0.000_412_6), "0.000413");
        assert_eq!(fmt_sig3(0.04), "0.0400");
        assert_eq!(fmt_sig3(-12.34), "-12.3");
        assert_eq!(fmt_sig3(0.0), "0");
        assert_eq!(fmt_sig3(f64::NAN), "-");
        // A rate that is not zero never reads as zero.
        for v in [1e-9, 3e-5, 0.049, 0.0004] {
            let s = fmt_sig3(v);
            assert!(s.parse::<f64>().unwrap() > 0.0, "{v} -> {s}");
        }
    }
}
