//! `/api/v1/scheduler/config…`: apply, get, versions, validate, diff, rollback, and the
//! what-if preview of a draft (`super::preview`).
//!
//! Bodies may be JSON or YAML (by Content-Type, else sniffed). An apply body is either a bare
//! config or `{"config": …, "message": …, "expected_active_version": …}`; `message` and
//! `expected_active_version` may also come as query parameters (handy with a YAML body).

use app::api::ApplyRequest;
use app::config::parse::{from_json_value, parse, parse_auto, Format};
use app::config::yaml::to_canonical_yaml;
use app::config::{Report, SchedulerConfig};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;
use serde_json::json;

use super::body::{parse_i64, respond, sent_yaml, wants_yaml, Params, PathText, RawBody};
use super::error::ApiError;
use crate::services::auth::Caller;
use crate::state::AppState;
use crate::store::config::ApplyMeta;

/// The config routes, to be nested under `/api/v1/scheduler/config`.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(get_config).post(apply))
        .route("/versions", get(list_versions))
        .route("/versions/{version}", get(get_version))
        .route("/validate", post(validate_config))
        .route("/diff", get(diff))
        .route("/rollback", post(rollback))
        .route("/preview", post(super::preview::preview))
}

async fn get_config(State(state): State<AppState>, headers: HeaderMap, params: Params) -> Result<Response, ApiError> {
    let version = params.get_i64("version")?;
    version_response(&state, version, &headers, &params).await
}

async fn get_version(State(state): State<AppState>, PathText(raw): PathText, headers: HeaderMap, params: Params) -> Result<Response, ApiError> {
    let version = parse_i64("version", &raw)?;
    version_response(&state, Some(version), &headers, &params).await
}

/// JSON: the whole version record. YAML: the canonical config, headed by a comment, ready
/// to be edited and applied again.
async fn version_response(state: &AppState, version: Option<i64>, headers: &HeaderMap, params: &Params) -> Result<Response, ApiError> {
    let v = state.config.get(version).await?;
    if wants_yaml(headers, params) {
        let mut text = format!(
            "# Berth scheduler config, version {}{}, applied {} by {}\n",
            v.version,
            if v.is_active { " (active)" } else { "" },
            v.created_at.to_rfc3339(),
            v.creator_id
        );
        if let Some(m) = &v.message {
            text.push_str(&format!("# {}\n", m.replace('\n', " ")));
        }
        text.push_str(&to_canonical_yaml(&v.config));
        return Ok(([(axum::http::header::CONTENT_TYPE, "application/yaml")], text).into_response());
    }
    Ok(respond(StatusCode::OK, &v, false))
}

async fn apply(State(state): State<AppState>, caller: Caller, headers: HeaderMap, params: Params, body: RawBody) -> Result<Response, ApiError> {
    let (config, mut meta) = read_apply_body(&headers, &body)?;
    if let Some(m) = params.get("message") {
        meta.message = Some(m.to_string());
    }
    if let Some(v) = params.get_i64("expected_active_version")? {
        meta.expected_active_version = Some(v);
    }
    let applied = state.config.apply(&caller, &config, &meta).await?;
    Ok(respond(StatusCode::OK, &applied, wants_yaml(&headers, &params)))
}

/// Splits an apply body into the config and its metadata.
pub(super) fn read_apply_body(headers: &HeaderMap, body: &RawBody) -> Result<(SchedulerConfig, ApplyMeta), ApiError> {
    let text = body.text()?;
    let is_yaml = sent_yaml(headers).unwrap_or_else(|| !text.trim_start().starts_with('{'));
    if !is_yaml {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| invalid_body(format!("malformed JSON: {e}"), e.line(), e.column()))?;
        if value.get("config").is_some() {
            let request: ApplyRequest = serde_json::from_value(value).map_err(|e| ApiError::bad_request(format!("apply request: {e}")))?;
            let config = from_json_value(&request.config).map_err(ApiError::invalid_config)?;
            let meta = ApplyMeta { message: request.message, expected_active_version: request.expected_active_version, ..Default::default() };
            return Ok((config, meta));
        }
        return Ok((from_json_value(&value).map_err(ApiError::invalid_config)?, ApplyMeta::default()));
    }
    Ok((parse(text, Format::Yaml).map_err(ApiError::invalid_config)?, ApplyMeta::default()))
}

/// A body that is not JSON at all is an invalid config, with the place it broke.
fn invalid_body(message: String, line: usize, column: usize) -> ApiError {
    let problem = app::config::Problem { line: Some(line), column: Some(column), ..app::config::Problem::error("", message) };
    ApiError::invalid_config(vec![problem])
}

async fn list_versions(State(state): State<AppState>, headers: HeaderMap, params: Params) -> Result<Response, ApiError> {
    let page = state.config.list(params.get_i64("max_items")?, params.get("cursor")).await?;
    Ok(respond(StatusCode::OK, &page, wants_yaml(&headers, &params)))
}

/// Validates without storing: always 200 when the body could be read, with every problem.
/// With the server's nodes: flavors that select none, quotas above what they have.
async fn validate_config(State(state): State<AppState>, headers: HeaderMap, params: Params, body: RawBody) -> Result<Response, ApiError> {
    let text = body.text()?;
    let parsed = match sent_yaml(&headers) {
        Some(true) => parse(text, Format::Yaml),
        Some(false) => parse(text, Format::Json),
        None => parse_auto(text),
    };
    let report = match parsed {
        Ok(config) => state.config.check(&config),
        Err(problems) => Report { problems },
    };
    let body = json!({ "valid": !report.has_errors(), "problems": report.problems });
    Ok(respond(StatusCode::OK, &body, wants_yaml(&headers, &params)))
}

async fn diff(State(state): State<AppState>, headers: HeaderMap, params: Params) -> Result<Response, ApiError> {
    let diff = state.config.diff(params.get_i64("from")?, params.get_i64("to")?).await?;
    Ok(respond(StatusCode::OK, &diff, wants_yaml(&headers, &params)))
}

/// Body of a rollback: the version to restore.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RollbackRequest {
    pub version: Option<i64>,
    pub message: Option<String>,
    pub expected_active_version: Option<i64>,
}

/// A rollback body (JSON; an empty body is an empty request).
pub(super) fn read_rollback_body(body: &RawBody) -> Result<RollbackRequest, ApiError> {
    let text = body.text()?;
    if text.trim().is_empty() {
        return Ok(RollbackRequest::default());
    }
    serde_json::from_str(text).map_err(|e| ApiError::bad_request(format!("rollback request: {e}")))
}

async fn rollback(State(state): State<AppState>, caller: Caller, headers: HeaderMap, params: Params, body: RawBody) -> Result<Response, ApiError> {
    let mut request = read_rollback_body(&body)?;
    if let Some(v) = params.get_i64("version")? {
        request.version = Some(v);
    }
    let version = request.version.ok_or_else(|| ApiError::bad_request("version: required (the version to restore)"))?;
    let meta = ApplyMeta {
        message: request.message,
        expected_active_version: request.expected_active_version.or(params.get_i64("expected_active_version")?),
        ..ApplyMeta::default()
    };
    let applied = state.config.rollback(&caller, version, &meta).await?;
    Ok(respond(StatusCode::OK, &applied, wants_yaml(&headers, &params)))
}
