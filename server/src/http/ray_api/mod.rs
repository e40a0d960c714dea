//! Ray's Job Submission REST API, answered by Berth: `ray job submit --address
//! http://berth:3000 …` and `JobSubmissionClient("http://berth:3000")` work unchanged, and
//! every job goes through Berth's queues, quotas and preemption to whichever backend its
//! flavor selects. See docs/ray-api.md.
//!
//! Paths as Ray has them (`/api/jobs/` with its slash), answers in Ray's shapes (see
//! [`wire`]), errors as plain text with the status Berth's one mapping gives
//! (`http::error`), in the caller's field names. Everything goes through the services:
//! jobs (`Runtime`, which also resolves a submission id) and packages.

mod tail;
pub mod wire;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use super::body::{PathText, RawBody};
use super::error::ApiError;
use crate::backends::Stream;
use crate::services::auth::Caller;
use crate::services::jobs::RuntimeError;
use crate::services::packages::PackageError;
use crate::state::AppState;
use crate::store::jobs::JobFilter;
use wire::{details, in_ray_terms, SubmitRequest, Submitted};

/// The version of Ray's Jobs API answered (Ray 2.60's), and the Ray version reported.
const API_VERSION: &str = "4";
const RAY_VERSION: &str = "2.60.0";

/// Most jobs one `GET /api/jobs/` lists (the newest; Berth's own API pages through all).
const MAX_LISTED: i64 = app::api::MAX_PAGE;

/// Ray merges a job's two streams into one log.
const BOTH: [Stream; 2] = [Stream::Stdout, Stream::Stderr];

/// The routes, at the root as in Ray's dashboard.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/version", get(version))
        .route("/api/jobs/", get(list).post(submit))
        .route("/api/jobs/{id}", get(job).delete(delete))
        .route("/api/jobs/{id}/stop", axum::routing::post(stop))
        .route("/api/jobs/{id}/logs", get(logs))
        .route("/api/jobs/{id}/logs/tail", get(tail::tail))
        .route("/api/packages/{protocol}/{name}", get(package_exists).put(upload))
}

/// Whether `path` is one of Ray's (its errors, authentication's included, are plain text).
pub fn is_ray_path(path: &str) -> bool {
    path == "/api/version" || path.starts_with("/api/jobs/") || path.starts_with("/api/packages/")
}

/// An error as Ray's job server gives one: plain text (Ray's client shows the body as it
/// is), with the status Berth's mapping chose.
#[derive(Debug)]
pub struct RayError(pub ApiError);

impl RayError {
    fn bad_request(message: impl Into<String>) -> RayError {
        RayError(ApiError::bad_request(message))
    }
}

impl From<ApiError> for RayError {
    fn from(e: ApiError) -> Self {
        RayError(e)
    }
}

impl From<RuntimeError> for RayError {
    fn from(e: RuntimeError) -> Self {
        match e {
            // Ray's words, which scripts look for.
            RuntimeError::NotFound(id) => RayError(ApiError::not_found(format!("Job {id} does not exist"))),
            RuntimeError::Invalid(m) => RayError(ApiError::from(RuntimeError::Invalid(in_ray_terms(&m)))),
            other => RayError(other.into()),
        }
    }
}

impl From<PackageError> for RayError {
    fn from(e: PackageError) -> Self {
        RayError(e.into())
    }
}

impl IntoResponse for RayError {
    fn into_response(self) -> Response {
        (self.0.status, [(CONTENT_TYPE, "text/plain; charset=utf-8")], self.0.message).into_response()
    }
}

/// `GET /api/version`: the handshake every Ray client makes first.
async fn version() -> Response {
    Json(json!({
        "version": API_VERSION,
        "ray_version": RAY_VERSION,
        "ray_commit": concat!("berth-", env!("CARGO_PKG_VERSION")),
        "session_name": "berth",
    }))
    .into_response()
}

/// `POST /api/jobs/`: a Ray submission becomes a Berth job (see [`wire`]).
async fn submit(State(state): State<AppState>, caller: Caller, body: RawBody) -> Result<Response, RayError> {
    let req: SubmitRequest = super::jobs::decode(&body)?;
    let req = req.into_job_request().map_err(RayError::bad_request)?;
    let job = state.runtime.submit(req, &caller).await.map_err(|e| match e {
        RuntimeError::Rejected(job) => RayError(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "rejected",
            format!("Berth rejected the job ({}): {}", job.id, job.reason.as_deref().unwrap_or("")),
        )),
        other => other.into(),
    })?;
    let id = job.submission_id.unwrap_or(job.id);
    Ok(Json(Submitted { job_id: id.clone(), submission_id: id }).into_response())
}

/// `GET /api/jobs/`: the newest jobs, oldest first as Ray lists them.
async fn list(State(state): State<AppState>) -> Result<Response, RayError> {
    let filter = JobFilter { ray_visible: true, ..JobFilter::default() };
    let page = state.runtime.jobs(&filter, None, MAX_LISTED).await?;
    let jobs: Vec<wire::JobDetails> = page.jobs.iter().rev().map(details).collect();
    Ok(Json(jobs).into_response())
}

/// `GET /api/jobs/{id}`, by submission id or Berth's job id.
async fn job(State(state): State<AppState>, PathText(reference): PathText) -> Result<Response, RayError> {
    Ok(Json(details(&state.runtime.ray_job(&reference).await?)).into_response())
}

/// `POST /api/jobs/{id}/stop`: a cancel; `stopped: false` when the job had already ended.
async fn stop(State(state): State<AppState>, caller: Caller, PathText(reference): PathText) -> Result<Response, RayError> {
    let job = state.runtime.ray_job(&reference).await?;
    let stopped = match state.runtime.cancel(&job.id, &caller).await {
        Ok(_) => true,
        Err(RuntimeError::NotLive(_)) => false,
        Err(e) => return Err(e.into()),
    };
    Ok(Json(json!({ "stopped": stopped })).into_response())
}

/// `DELETE /api/jobs/{id}`: an ended job leaves Ray's view; Berth keeps it in its history.
async fn delete(State(state): State<AppState>, caller: Caller, PathText(reference): PathText) -> Result<Response, RayError> {
    let deleted = state.runtime.delete_from_ray_view(&reference, &caller).await?;
    Ok(Json(json!({ "deleted": deleted })).into_response())
}

/// `GET /api/jobs/{id}/logs`: the latest run's log, stdout then stderr, in one string.
async fn logs(State(state): State<AppState>, PathText(reference): PathText) -> Result<Response, RayError> {
    let job = state.runtime.ray_job(&reference).await?;
    let mut log = Vec::new();
    for stream in BOTH {
        log.extend(state.runtime.logs(&job.id, stream, Some(super::follow::MAX_LOG)).await?.0);
    }
    Ok(Json(json!({ "logs": String::from_utf8_lossy(&log) })).into_response())
}

/// `GET /api/packages/{protocol}/{name}`: 200 when stored, 404 when not (then Ray's client
/// uploads it).
async fn package_exists(State(state): State<AppState>, axum::extract::Path((protocol, name)): axum::extract::Path<(String, String)>) -> Result<Response, RayError> {
    match state.packages.exists(&protocol, &name).await? {
        true => Ok(StatusCode::OK.into_response()),
        false => Err(RayError(ApiError::not_found(format!("Package {protocol}://{name} does not exist")))),
    }
}

/// The most of a refused upload read anyway so that its client gets the refusal (see
/// [`upload`]), unless twice the limit is more.
const DRAIN_BYTES: u64 = 64 << 20;

/// Reads and drops a request body, at most `bound` bytes, a chunk at a time.
async fn drain(body: Body, bound: u64) {
    use futures_util::StreamExt;
    let mut stream = body.into_data_stream();
    let mut read = 0u64;
    while let Some(Ok(chunk)) = stream.next().await {
        read += chunk.len() as u64;
        if read >= bound {
            break;
        }
    }
}

/// `PUT /api/packages/{protocol}/{name}`: the zip archive, at most the package limit.
async fn upload(
    State(state): State<AppState>,
    caller: Caller,
    axum::extract::Path((protocol, name)): axum::extract::Path<(String, String)>,
    request: Request,
) -> Result<Response, RayError> {
    let limit = state.packages.settings().max_bytes;
    let too_large = |size: u64| RayError(PackageError::TooLarge { size, limit }.into());
    let declared = request.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if let Some(size) = declared.filter(|s| *s > limit) {
        // Read what the client is still sending before refusing, within reason: a client
        // cut off mid-upload sees a reset connection, not this answer.
        if size <= limit.saturating_mul(2).max(DRAIN_BYTES) {
            drain(request.into_body(), size).await;
        }
        return Err(too_large(size));
    }
    let bytes = axum::body::to_bytes(request.into_body(), usize::try_from(limit).unwrap_or(usize::MAX)).await.map_err(|e| {
        if e.to_string().contains("length limit") {
            too_large(declared.unwrap_or(limit + 1))
        } else {
            RayError::bad_request(format!("cannot read the upload: {e}"))
        }
    })?;
    state.packages.upload(&caller, &protocol, &name, bytes.to_vec()).await?;
    Ok((StatusCode::OK, Body::empty()).into_response())
}
