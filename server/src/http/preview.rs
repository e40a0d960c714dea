//! `POST /api/v1/scheduler/config/preview`: what a draft config would have done to the
//! recorded workload of a window, next to what the active config did (see `crate::services::preview`).
//!
//! Body: `{"config": <config object, or its YAML/JSON text>, "window": "24h" | {from, to}}`,
//! or a bare config in YAML or JSON (then `?window=` picks the window). An invalid draft is a
//! 422 with every problem, as for apply. A client that goes away cancels the replay.

use app::config::parse::{from_json_value, parse, parse_auto, Format};
use app::config::SchedulerConfig;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::Value;

use super::body::{respond, sent_yaml, wants_yaml, Params, RawBody};
use super::error::ApiError;
use crate::services::preview::{self, window, Sources};
use crate::clock::now_us;
use crate::state::AppState;

pub async fn preview(State(state): State<AppState>, headers: HeaderMap, params: Params, body: RawBody) -> Result<Response, ApiError> {
    let (draft, window_value) = read_body(&headers, &params, &body)?;
    let now = now_us();
    let span = window::resolve(window_value.as_ref(), now).map_err(ApiError::bad_request)?;
    // Dropped with this future when the client goes away: the replay stops.
    let report = preview::run(&Sources::of(&state), &draft, span, now).await?;
    Ok(respond(StatusCode::OK, &report, wants_yaml(&headers, &params)))
}

/// The draft and the window value from the body (or the query string).
fn read_body(headers: &HeaderMap, params: &Params, body: &RawBody) -> Result<(SchedulerConfig, Option<Value>), ApiError> {
    let text = body.text()?;
    let from_query = params.get("window").map(|w| Value::String(w.to_string()));
    if text.trim().is_empty() {
        return Err(ApiError::bad_request("config: required (the draft to preview)"));
    }
    let is_yaml = sent_yaml(headers).unwrap_or_else(|| !text.trim_start().starts_with('{'));
    if is_yaml {
        return Ok((parse(text, Format::Yaml).map_err(ApiError::invalid_config)?, from_query));
    }
    let value: Value = serde_json::from_str(text).map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
    let Some(obj) = value.as_object().filter(|o| o.contains_key("config")) else {
        return Ok((from_json_value(&value).map_err(ApiError::invalid_config)?, from_query));
    };
    if let Some(k) = obj.keys().find(|k| *k != "config" && *k != "window") {
        return Err(ApiError::bad_request(format!("{k}: unknown field; a preview request has `config` and `window`")));
    }
    Ok((config_field(&obj["config"])?, obj.get("window").cloned().or(from_query)))
}

/// The `config` field of a request: a config object, or its YAML or JSON text. A config
/// that does not parse is a 422 with every problem, as for apply.
pub(super) fn config_field(value: &Value) -> Result<SchedulerConfig, ApiError> {
    match value {
        Value::String(text) => parse_auto(text).map_err(ApiError::invalid_config),
        v @ Value::Object(_) => from_json_value(v).map_err(ApiError::invalid_config),
        other => Err(ApiError::bad_request(format!("config: must be a config object or its YAML/JSON text, got {other}"))),
    }
}

