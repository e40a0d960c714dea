//! Request bodies, query strings and path parameters read by hand, so that every malformed input gets a JSON
//! error naming the field, and YAML and JSON are both accepted and returned.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::error::ApiError;

/// Largest request body accepted, in bytes.
pub const MAX_BODY: usize = 1024 * 1024;

/// The raw body; too large or unreadable bodies become JSON errors.
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        // Refuse a declared oversize body at once instead of reading up to the limit.
        let declared = req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
        if declared.is_some_and(|len| len > MAX_BODY) {
            return Err(too_large());
        }
        match Bytes::from_request(req, state).await {
            Ok(bytes) => Ok(RawBody(bytes)),
            Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(too_large()),
            Err(rejection) => Err(ApiError::bad_request(format!("cannot read the request body: {}", rejection.body_text()))),
        }
    }
}

fn too_large() -> ApiError {
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", format!("request body is larger than the limit of {MAX_BODY} bytes"))
}

impl RawBody {
    /// The body as UTF-8 text.
    pub fn text(&self) -> Result<&str, ApiError> {
        std::str::from_utf8(&self.0).map_err(|_| ApiError::bad_request("request body is not valid UTF-8"))
    }
}

/// The query string as a map; `get_i64` parses a number and names the parameter on failure.
pub struct Params(pub HashMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        Params::parse(parts.uri.query().unwrap_or(""))
    }
}

impl Params {
    /// Parses a query string. A NUL character in a name or value is a 400 too: PostgreSQL
    /// can neither store nor compare one.
    pub fn parse(query: &str) -> Result<Params, ApiError> {
        let map: HashMap<String, String> =
            serde_urlencoded::from_str(query).map_err(|e| ApiError::bad_request(format!("malformed query string: {e}")))?;
        if let Some(name) = map.iter().find(|(k, v)| k.contains('\0') || v.contains('\0')).map(|(k, _)| k) {
            return Err(ApiError::bad_request(format!("{}: must not contain a NUL character", name.replace('\0', "\\0"))));
        }
        Ok(Params(map))
    }

    /// The parameter `name` as text.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// The parameter `name` as an integer, or a 400 that says which parameter is wrong.
    pub fn get_i64(&self, name: &str) -> Result<Option<i64>, ApiError> {
        self.get(name).map(|raw| parse_i64(name, raw)).transpose()
    }

    /// `max_items`, else `default`, within the one page-size bound (`app::api::page_size`).
    pub fn page_size(&self, default: i64) -> Result<i64, ApiError> {
        app::api::page_size(self.get_i64("max_items")?, default).map_err(ApiError::bad_request)
    }
}

/// Parses `raw` as an integer for the field `name`, or a 400 naming it.
pub fn parse_i64(name: &str, raw: &str) -> Result<i64, ApiError> {
    raw.trim().parse().map_err(|_| ApiError::bad_request(format!("{name}: `{raw}` is not an integer")))
}

/// The one parameter of a route's path as text; one that is not UTF-8 once decoded is a JSON
/// 400 like every other error (axum's own rejection is plain text), and so is a NUL character.
pub struct PathText(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathText {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(text)) if text.contains('\0') => Err(ApiError::bad_request("path: must not contain a NUL character")),
            Ok(Path(text)) => Ok(PathText(text)),
            Err(rejection) => Err(ApiError::bad_request(rejection.body_text())),
        }
    }
}

/// Whether the client sent YAML (by Content-Type).
pub fn sent_yaml(headers: &HeaderMap) -> Option<bool> {
    let ct = headers.get(CONTENT_TYPE)?.to_str().ok()?.to_ascii_lowercase();
    if ct.contains("yaml") {
        Some(true)
    } else if ct.contains("json") {
        Some(false)
    } else {
        None
    }
}

/// Whether the client wants YAML back (`?format=yaml` or an Accept header naming yaml).
pub fn wants_yaml(headers: &HeaderMap, params: &Params) -> bool {
    match params.get("format") {
        Some(f) => f.eq_ignore_ascii_case("yaml"),
        None => headers
            .get(ACCEPT)
            .and_then(|a| a.to_str().ok())
            .is_some_and(|a| a.to_ascii_lowercase().contains("yaml")),
    }
}

/// `value` as JSON, or as YAML when asked for.
pub fn respond<T: Serialize>(status: StatusCode, value: &T, yaml: bool) -> Response {
    if yaml {
        match serde_norway::to_string(value) {
            Ok(text) => (status, [(CONTENT_TYPE, "application/yaml")], text).into_response(),
            Err(e) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()).into_response(),
        }
    } else {
        (status, axum::Json(value)).into_response()
    }
}
