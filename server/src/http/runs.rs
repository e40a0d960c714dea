//! What runs tell the server about themselves: `POST /api/v1/runs/{run}/exit`, the exit
//! status a Ray run sends when its command ends (`--ray-callback-url`; see
//! `backends::ray::exits`). Not behind a user's token: the run shows the token Berth made
//! for it when it submitted it.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;

use super::body::{PathText, RawBody};
use super::error::ApiError;
use crate::backends::ray::{ExitReport, EXIT_TOKEN_HEADER};
use crate::state::AppState;

/// Routes nested under `/api/v1`.
pub fn routes() -> Router<AppState> {
    Router::new().route("/runs/{run}/exit", post(exit))
}

/// Whether `path` is a run's report (let through without a user's credentials).
pub(crate) fn is_report(path: &str) -> bool {
    path.strip_prefix("/api/v1/runs/").and_then(|rest| rest.strip_suffix("/exit")).is_some_and(|run| !run.is_empty() && !run.contains('/'))
}

/// The body is the command's exit status, a whole number.
async fn exit(State(state): State<AppState>, PathText(run): PathText, headers: HeaderMap, body: RawBody) -> Result<Response, ApiError> {
    let token = headers.get(EXIT_TOKEN_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let text = body.text()?.trim();
    let status: i32 = text.parse().map_err(|_| ApiError::bad_request(format!("body: `{text}` is not an exit status (a whole number)")))?;
    let reports: Vec<ExitReport> = state.ray.iter().map(|b| b.report_exit(&run, token, status)).collect();
    if reports.contains(&ExitReport::Taken) {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else if reports.contains(&ExitReport::Refused) {
        Err(ApiError::new(StatusCode::FORBIDDEN, "forbidden", format!("{EXIT_TOKEN_HEADER}: not the token of run {run}")))
    } else {
        Err(ApiError::not_found(format!("run {run} is not watched by this server (its end is found by polling Ray)")))
    }
}
