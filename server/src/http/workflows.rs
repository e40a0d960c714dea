//! Workflow routes under `/api/v1`: hold and release a pending job, cancel what is left of
//! a stage (an array), and the accounting report. Dependencies and holds at submit are
//! fields of the job request.

use app::jobs::UsageGroup;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use super::body::{Params, PathText};
use super::error::ApiError;
use super::jobs::parse_time_at;
use crate::clock::now_us;
use crate::services::auth::Caller;
use crate::state::AppState;

/// Routes nested under `/api/v1`.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/jobs/{id}/hold", post(hold))
        .route("/jobs/{id}/release", post(release))
        .route("/stages/{id}/cancel", post(cancel_stage))
        .route("/usage", get(usage))
}

/// `?by=user|queue|label:KEY&since=7d&until=&format=json|csv`: jobs that ended in the
/// range (default: the last 7 days), per group.
async fn usage(State(state): State<AppState>, params: Params) -> Result<Response, ApiError> {
    let (by, since, until) = usage_query(&params)?;
    let csv = match params.get("format").unwrap_or("json") {
        "json" => false,
        "csv" => true,
        other => return Err(ApiError::bad_request(format!("format: `{other}` is not json or csv"))),
    };
    let report = state.runtime.usage(by, since, until).await?;
    Ok(if csv { ([(CONTENT_TYPE, "text/csv; charset=utf-8")], report.to_csv()).into_response() } else { Json(report).into_response() })
}

/// The report's grouping and range, shared by the REST API and the dashboard.
pub(crate) fn usage_query(params: &Params) -> Result<(UsageGroup, i64, i64), ApiError> {
    let by = UsageGroup::parse(params.get("by").unwrap_or("user")).map_err(ApiError::bad_request)?;
    let now = now_us();
    let until = params.get("until").map(|t| parse_time_at("until", t, now)).transpose()?.unwrap_or(now);
    let since = params.get("since").map(|t| parse_time_at("since", t, now)).transpose()?.unwrap_or(until - 7 * 86_400 * 1_000_000);
    Ok((by, since, until))
}

/// `queue=&since=&until=` of the dashboard's wait-time charts (default: the last hour).
pub(crate) fn admissions_query(params: &Params) -> Result<(String, i64, i64), ApiError> {
    let queue = params.get("queue").filter(|q| !q.is_empty()).ok_or_else(|| ApiError::bad_request("queue: a queue name is needed"))?;
    let now = now_us();
    let until = params.get("until").map(|t| parse_time_at("until", t, now)).transpose()?.unwrap_or(now);
    let since = params.get("since").map(|t| parse_time_at("since", t, now)).transpose()?.unwrap_or(until - 3600 * 1_000_000);
    Ok((queue.to_string(), since, until))
}

async fn hold(State(state): State<AppState>, caller: Caller, PathText(id): PathText) -> Result<Response, ApiError> {
    Ok(Json(state.runtime.hold(&id, true, &caller).await?).into_response())
}

async fn release(State(state): State<AppState>, caller: Caller, PathText(id): PathText) -> Result<Response, ApiError> {
    Ok(Json(state.runtime.hold(&id, false, &caller).await?).into_response())
}

async fn cancel_stage(State(state): State<AppState>, caller: Caller, PathText(id): PathText) -> Result<Response, ApiError> {
    Ok(Json(state.runtime.cancel_stage(&id, &caller).await?).into_response())
}
