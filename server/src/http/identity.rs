//! Who is calling. Until authentication exists, the caller names itself with the
//! `X-Berth-User` header; without it the caller is `anonymous`.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::error::ApiError;

/// Header that carries the caller's user id.
pub const USER_HEADER: &str = "x-berth-user";

/// The caller's user id, recorded as `creator_id` of the versions it applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Identity {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let Some(raw) = parts.headers.get(USER_HEADER) else {
            return Ok(Identity("anonymous".into()));
        };
        let user = raw.to_str().map_err(|_| ApiError::bad_request("X-Berth-User: must be printable ASCII"))?.trim();
        if user.is_empty() || user.len() > 128 || user.chars().any(|c| c.is_control()) {
            return Err(ApiError::bad_request("X-Berth-User: must be 1 to 128 printable characters"));
        }
        Ok(Identity(user.to_string()))
    }
}
