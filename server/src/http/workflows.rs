//! Workflow routes under `/api/v1`: hold and release a pending job, cancel what is left of
//! a stage (an array). Dependencies and holds at submit are fields of the job request.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};

use super::body::PathText;
use super::error::ApiError;
use crate::services::auth::Caller;
use crate::state::AppState;

/// Routes nested under `/api/v1`.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/jobs/{id}/hold", post(hold))
        .route("/jobs/{id}/release", post(release))
        .route("/stages/{id}/cancel", post(cancel_stage))
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
