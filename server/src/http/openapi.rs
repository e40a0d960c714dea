//! `GET /api/v1/openapi.json`: the OpenAPI document of the whole REST API. It is written by
//! hand in `openapi.yaml` beside this file (YAML reads and reviews better than JSON), embedded
//! in the binary and converted to JSON once, when the router is built.

use std::sync::Arc;

use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::error::ApiError;
use crate::state::AppState;

/// The document as written.
pub const YAML: &str = include_str!("openapi.yaml");

/// The document as JSON, or why it does not parse.
pub fn document() -> Result<serde_json::Value, String> {
    serde_norway::from_str(YAML).map_err(|e| format!("openapi.yaml does not parse: {e}"))
}

/// The route, to be nested under `/api/v1`.
pub fn routes() -> Router<AppState> {
    // A document that does not parse (the tests make sure it does) is a 500, not a panic.
    let json: Arc<Result<String, String>> = Arc::new(document().and_then(|v| serde_json::to_string(&v).map_err(|e| e.to_string())));
    Router::new().route("/openapi.json", get(move || serve(json.clone())))
}

async fn serve(json: Arc<Result<String, String>>) -> Response {
    match json.as_ref() {
        Ok(text) => ([(CONTENT_TYPE, "application/json")], text.clone()).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "cannot serve the OpenAPI document");
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error; see the server log").into_response()
        }
    }
}

#[cfg(test)]
mod tests;
