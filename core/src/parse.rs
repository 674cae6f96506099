//! Parsers of what people type, shared by the CLI and the page: durations and
//! comma-separated lists. Errors name the bad value.

use std::time::Duration;

/// Parse a duration: `250ms`, `60s`, `30m`, `1h`, or a plain number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, unit_ms) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1000.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60_000.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3_600_000.0)
    } else {
        (t, 1000.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 500ms, 60s, 30m, 1h)"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("{s:?} must be a positive duration"));
    }
    Ok(Duration::from_secs_f64(v * unit_ms / 1000.0))
}

/// Parse a comma-separated list of positive integers (`1,4,8`).
pub fn parse_u32_list(s: &str) -> Result<Vec<u32>, String> {
    let items: Result<Vec<u32>, String> = s
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| match x.parse::<u32>() {
            Ok(0) => Err(format!("{x:?} must be at least 1")),
            Ok(v) => Ok(v),
            Err(_) => Err(format!("{x:?} is not a whole number")),
        })
        .collect();
    let items = items?;
    if items.is_empty() {
        return Err("the list is empty".into());
    }
    Ok(items)
}

/// Parse a comma-separated list of positive numbers (`2.5,5`).
pub fn parse_f64_list(s: &str) -> Result<Vec<f64>, String> {
    let items: Result<Vec<f64>, String> = s
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| match x.parse::<f64>() {
            Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
            Ok(_) => Err(format!("{x:?} must be a positive number")),
            Err(_) => Err(format!("{x:?} is not a number")),
        })
        .collect();
    let items = items?;
    if items.is_empty() {
        return Err("the list is empty".into());
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("60s").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn lists() {
        assert_eq!(parse_u32_list("1, 4,8").unwrap(), vec![1, 4, 8]);
        assert!(parse_u32_list("1,0").unwrap_err().contains("\"0\""));
        assert!(parse_f64_list("2.5,-5").unwrap_err().contains("\"-5\""));
        assert!(parse_u32_list("").is_err());
    }
}
