//! The window of recorded workload a preview replays: `"24h"` back from now, or an explicit
//! `{from, to}`. Every refusal names the field.

use chrono::{DateTime, Utc};
use serde_json::Value;

/// Longest window: a month of records is already far more than an edit needs.
pub const MAX_DAYS: i64 = 31;

/// Default window: the last day.
pub const DEFAULT: &str = "24h";

/// A resolved window, microseconds since the epoch, `from < to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub from_us: i64,
    pub to_us: i64,
}

/// Parses a duration like `24h`, `90m`, `7d`, `3600s` (or a bare number of seconds).
pub fn duration_us(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 = number.parse().map_err(|_| format!("window: `{text}` is not a duration like 24h, 90m, 7d or 3600s"))?;
    let unit_s = match unit.trim() {
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        "w" => 7.0 * 86_400.0,
        other => return Err(format!("window: unknown unit `{other}` in `{text}`; use s, m, h, d or w")),
    };
    let us = n * unit_s * 1e6;
    if !us.is_finite() || us < 1e6 {
        return Err(format!("window: `{text}` must be at least one second"));
    }
    if us > (MAX_DAYS * 86_400) as f64 * 1e6 {
        return Err(format!("window: at most {MAX_DAYS} days, got `{text}`"));
    }
    Ok(us as i64)
}

/// The window a request asked for (`None`: the default), relative to `now_us`.
pub fn resolve(value: Option<&Value>, now_us: i64) -> Result<Span, String> {
    match value {
        None | Some(Value::Null) => Ok(Span { from_us: now_us - duration_us(DEFAULT)?, to_us: now_us }),
        Some(Value::String(text)) => Ok(Span { from_us: now_us - duration_us(text)?, to_us: now_us }),
        Some(Value::Object(map)) => {
            if let Some(k) = map.keys().find(|k| *k != "from" && *k != "to") {
                return Err(format!("window.{k}: unknown field; a window is {{from, to}} or a duration like \"24h\""));
            }
            let time = |field: &str| -> Result<i64, String> {
                let v = map.get(field).ok_or_else(|| format!("window.{field}: required (an RFC 3339 time)"))?;
                let text = v.as_str().ok_or_else(|| format!("window.{field}: must be an RFC 3339 time string, got {v}"))?;
                let t: DateTime<Utc> = DateTime::parse_from_rfc3339(text)
                    .map_err(|e| format!("window.{field}: `{text}` is not an RFC 3339 time ({e})"))?
                    .with_timezone(&Utc);
                Ok(t.timestamp_micros())
            };
            let (from_us, to_us) = (time("from")?, time("to")?);
            if from_us >= to_us {
                return Err("window.to: must be after window.from".into());
            }
            if to_us - from_us > MAX_DAYS * 86_400 * 1_000_000 {
                return Err(format!("window: at most {MAX_DAYS} days long"));
            }
            Ok(Span { from_us, to_us })
        }
        Some(other) => Err(format!("window: must be a duration like \"24h\" or {{from, to}}, got {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations_and_ranges_resolve_and_errors_name_the_field() {
        assert_eq!(duration_us("24h"), Ok(86_400_000_000));
        assert_eq!(duration_us("90m"), Ok(5_400_000_000));
        assert_eq!(duration_us("3600"), Ok(3_600_000_000));
        assert!(duration_us("1y").unwrap_err().starts_with("window: unknown unit"));
        assert!(duration_us("abc").unwrap_err().starts_with("window:"));
        assert!(duration_us("40d").unwrap_err().contains("at most 31 days"));
        assert!(duration_us("0s").is_err());
        let now = 100 * 86_400_000_000;
        assert_eq!(resolve(None, now), Ok(Span { from_us: now - 86_400_000_000, to_us: now }));
        let range = json!({"from": "2025-01-01T00:00:00Z", "to": "2025-01-01T01:00:00Z"});
        let span = resolve(Some(&range), now).unwrap();
        assert_eq!(span.to_us - span.from_us, 3_600_000_000);
        let backwards = json!({"from": "2025-01-01T01:00:00Z", "to": "2025-01-01T00:00:00Z"});
        assert_eq!(resolve(Some(&backwards), now).unwrap_err(), "window.to: must be after window.from");
        assert!(resolve(Some(&json!({"from": "x", "to": "y"})), now).unwrap_err().starts_with("window.from:"));
        assert!(resolve(Some(&json!({"since": 1})), now).unwrap_err().starts_with("window.since:"));
        assert!(resolve(Some(&json!(5)), now).unwrap_err().starts_with("window:"));
    }
}
