//! Query strings as the `anyscale` client writes them: list parameters as repeated keys
//! (`event_type=A&event_type=B`), booleans as Python writes them (`True`/`False`), times as
//! `isoformat()` (`2026-01-02T03:04:05+00:00`, or without an offset for a naive time), and
//! page sizes the client already bounds. Every refusal is a 400 naming the parameter.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use chrono::{DateTime, NaiveDateTime, Utc};

use crate::http::error::ApiError;

/// Every `(name, value)` pair of the query string, in order, repeats kept.
#[derive(Debug, Default)]
pub struct Query(Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for Query {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        Query::parse(parts.uri.query().unwrap_or(""))
    }
}

impl Query {
    /// Parses a query string; a NUL character anywhere is refused (PostgreSQL cannot hold one).
    pub fn parse(query: &str) -> Result<Query, ApiError> {
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_str(query).map_err(|e| ApiError::bad_request(format!("malformed query string: {e}")))?;
        if let Some((name, _)) = pairs.iter().find(|(k, v)| k.contains('\0') || v.contains('\0')) {
            return Err(ApiError::bad_request(format!("{}: must not contain a NUL character", name.replace('\0', "\\0"))));
        }
        Ok(Query(pairs))
    }

    /// Every value of `name`, in order; empty values are left out (an unset optional).
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.0.iter().filter(|(k, v)| k == name && !v.is_empty()).map(|(_, v)| v.as_str()).collect()
    }

    /// Every value of list parameter `name`, at most `max` of them (each becomes a term of
    /// a database query, whose size is bounded).
    pub fn list(&self, name: &str, max: usize) -> Result<Vec<&str>, ApiError> {
        let values = self.all(name);
        if values.len() > max {
            return Err(ApiError::bad_request(format!("{name}: at most {max} values, got {}", values.len())));
        }
        Ok(values)
    }

    /// The value of a single-valued parameter; given twice is an error.
    pub fn one(&self, name: &str) -> Result<Option<&str>, ApiError> {
        match self.all(name).as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(one)),
            many => Err(ApiError::bad_request(format!("{name}: expected one value, got {}", many.len()))),
        }
    }

    /// An integer within `min..=max`, or `default` when absent.
    pub fn int(&self, name: &str, min: i64, max: i64, default: i64) -> Result<i64, ApiError> {
        let Some(raw) = self.one(name)? else { return Ok(default) };
        let n: i64 = raw.trim().parse().map_err(|_| ApiError::bad_request(format!("{name}: `{raw}` is not an integer")))?;
        if !(min..=max).contains(&n) {
            return Err(ApiError::bad_request(format!("{name}: must be between {min} and {max}, got {n}")));
        }
        Ok(n)
    }

    /// A boolean: `True`/`False` as Python writes them, also `true`/`false`, `1`/`0`.
    pub fn bool(&self, name: &str, default: bool) -> Result<bool, ApiError> {
        match self.one(name)? {
            None => Ok(default),
            Some("True" | "true" | "1") => Ok(true),
            Some("False" | "false" | "0") => Ok(false),
            Some(other) => Err(ApiError::bad_request(format!("{name}: `{other}` is not a boolean (True or False)"))),
        }
    }

    /// A time in ISO 8601 (RFC 3339, or without an offset for UTC), in microseconds.
    pub fn time(&self, name: &str) -> Result<Option<i64>, ApiError> {
        self.one(name)?.map(|raw| parse_time(name, raw)).transpose()
    }
}

/// `raw` as microseconds since the epoch. A `+` that was not percent-encoded arrives as a
/// space (form decoding) and is read back as `+`.
pub fn parse_time(name: &str, raw: &str) -> Result<i64, ApiError> {
    let text = raw.trim().replace(' ', "+");
    if let Ok(t) = DateTime::parse_from_rfc3339(&text) {
        return Ok(t.with_timezone(&Utc).timestamp_micros());
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S%.f"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(&text, format) {
            return Ok(t.and_utc().timestamp_micros());
        }
    }
    Err(ApiError::bad_request(format!("{name}: `{raw}` is not an ISO 8601 time such as 2026-01-02T03:04:05+00:00")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_keys_python_booleans_and_iso_times_are_read() {
        let q = Query::parse("event_type=A&event_type=B&order_desc=False&count=20&start_time=2026-01-02T03%3A04%3A05%2B00%3A00&empty=").unwrap();
        assert_eq!(q.all("event_type"), ["A", "B"]);
        assert_eq!(q.list("event_type", 2).unwrap(), ["A", "B"]);
        assert_eq!(q.list("event_type", 1).unwrap_err().message, "event_type: at most 1 values, got 2");
        assert!(q.one("event_type").unwrap_err().message.starts_with("event_type: expected one value"));
        assert!(!q.bool("order_desc", true).unwrap());
        assert!(q.bool("absent", true).unwrap());
        assert_eq!(q.int("count", 0, 100, 10).unwrap(), 20);
        assert_eq!(q.int("absent", 0, 100, 10).unwrap(), 10);
        assert_eq!(q.one("empty").unwrap(), None);
        let t = q.time("start_time").unwrap().unwrap();
        assert_eq!(t, DateTime::parse_from_rfc3339("2026-01-02T03:04:05Z").unwrap().timestamp_micros());
    }

    #[test]
    fn refusals_name_the_parameter() {
        let q = Query::parse("count=51&order_desc=yes&start_time=yesterday&limit=x").unwrap();
        assert_eq!(q.int("count", 0, 50, 10).unwrap_err().message, "count: must be between 0 and 50, got 51");
        assert_eq!(q.int("limit", 1, 200, 50).unwrap_err().message, "limit: `x` is not an integer");
        assert_eq!(q.bool("order_desc", true).unwrap_err().message, "order_desc: `yes` is not a boolean (True or False)");
        assert!(q.time("start_time").unwrap_err().message.starts_with("start_time: `yesterday` is not an ISO 8601 time"));
        assert!(Query::parse("a=%00").is_err());
    }

    #[test]
    fn naive_times_are_utc_and_an_unencoded_plus_survives() {
        let utc = DateTime::parse_from_rfc3339("2026-01-02T03:04:05.5Z").unwrap().timestamp_micros();
        assert_eq!(parse_time("t", "2026-01-02T03:04:05.500000").unwrap(), utc);
        assert_eq!(parse_time("t", "2026-01-02T03:04:05.5 00:00").unwrap(), utc);
        assert_eq!(parse_time("t", "2026-01-02T04:04:05.5+01:00").unwrap(), utc);
    }
}
