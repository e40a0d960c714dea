//! The caller of a request, as [`super::auth::authenticate`] found it. Handlers take a
//! [`Caller`] argument; nothing in a request body or header other than the credentials
//! themselves can change who that is.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::error::ApiError;
use crate::services::auth::Caller;

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| ApiError::unauthorized("sign in, or send an API token as `Authorization: Bearer …`"))
    }
}
