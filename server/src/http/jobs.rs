//! Jobs, stages, queues, nodes, events and resource history under `/api/v1`, and the
//! mlumina-compatible `/add_task`, `/change_task_priority`, `/cancel_task`.

use std::time::Duration;

use app::jobs::{History, JobRequest, JobState, PriorityChange, StageRequest};
use axum::body::Body;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::json;

use super::body::{Params, PathText, RawBody};
use super::follow::{read_order, Follower, Growth, MAX_LOG};
use super::logmux::Mux;
use futures_util::StreamExt;
use super::error::ApiError;
use crate::services::auth::Caller;
use crate::backends::Stream;
use crate::store::jobs::{time_of, EventFilter, HistoryQuery, JobFilter};
use crate::clock::now_us;
use crate::services::jobs::RuntimeError;
use crate::state::AppState;

/// Routes nested under `/api/v1`.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/jobs", get(list_jobs).post(submit))
        .route("/jobs/{id}", get(get_job))
        .route("/jobs/{id}/logs", get(logs))
        .route("/jobs/{id}/cancel", post(cancel))
        .route("/jobs/{id}/priority", post(set_priority))
        .route("/stages", post(submit_stage))
        .route("/stages/{id}", get(get_stage))
        .route("/stages/{id}/results", get(stage_results))
        .route("/queues", get(queues))
        .route("/queues/{name}", get(queue))
        .route("/cohorts", get(cohorts))
        .route("/cohorts/{name}", get(cohort))
        .route("/nodes", get(nodes))
        .route("/events", get(events))
        .route("/history", get(history))
}

/// mlumina's routes, at the root like the original service.
pub fn mlumina_routes() -> Router<AppState> {
    Router::new()
        .route("/add_task", post(add_task))
        .route("/change_task_priority", post(change_task_priority))
        .route("/cancel_task", post(cancel_task))
}

/// A JSON body decoded into `T`; errors name the field (`resources.cpu: invalid type…`).
pub(super) fn decode<T: DeserializeOwned>(body: &RawBody) -> Result<T, ApiError> {
    let text = body.text()?;
    if text.trim().is_empty() {
        return Err(ApiError::bad_request("request body is empty; expected a JSON object"));
    }
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path.is_empty() || path == "." {
            ApiError::bad_request(format!("invalid request body: {inner}"))
        } else {
            ApiError::bad_request(format!("{path}: {inner}"))
        }
    })
}

async fn submit(State(state): State<AppState>, caller: Caller, body: RawBody) -> Result<Response, ApiError> {
    let req: JobRequest = decode(&body)?;
    let job = state.runtime.submit(req, &caller).await?;
    Ok((StatusCode::CREATED, Json(job)).into_response())
}

async fn list_jobs(State(state): State<AppState>, params: Params) -> Result<Response, ApiError> {
    let (filter, cursor, limit) = job_query(&params)?;
    Ok(Json(state.runtime.jobs(&filter, cursor, limit).await?).into_response())
}

/// `?queue=&state=a,b&label=K=V&submitter=&stage=&q=&since=&until=&cursor=&max_items=`,
/// shared by the REST API and the dashboard.
pub(crate) fn job_query(params: &Params) -> Result<(JobFilter, Option<i64>, i64), ApiError> {
    let limit = params.page_size(50)?;
    let cursor = params.get_i64("cursor")?;
    let mut filter = JobFilter {
        queue: params.get("queue").filter(|s| !s.is_empty()).map(str::to_string),
        submitter: params.get("submitter").filter(|s| !s.is_empty()).map(str::to_string),
        stage_id: params.get("stage").filter(|s| !s.is_empty()).map(str::to_string),
        search: params.get("q").map(str::trim).filter(|s| !s.is_empty()).map(str::to_string),
        submitted_after_us: params.get("since").map(|t| parse_time("since", t)).transpose()?,
        submitted_before_us: params.get("until").map(|t| parse_time("until", t)).transpose()?,
        ..JobFilter::default()
    };
    if let Some(states) = params.get("state").filter(|s| !s.is_empty()) {
        for s in states.split(',') {
            let state = JobState::parse(s.trim()).ok_or_else(|| {
                let all: Vec<&str> = JobState::ALL.iter().map(|s| s.as_str()).collect();
                ApiError::bad_request(format!("state: `{s}` is not a job state (one of {})", all.join(", ")))
            })?;
            filter.states.push(state);
        }
    }
    if let Some(label) = params.get("label").filter(|s| !s.is_empty()) {
        let (k, v) = label.split_once('=').ok_or_else(|| ApiError::bad_request(format!("label: `{label}` is not KEY=VALUE")))?;
        filter.label = Some((k.to_string(), v.to_string()));
    }
    Ok((filter, cursor, limit))
}

/// An RFC 3339 time, or a duration ago (`90s`, `15m`, `2h`, `7d`), as microseconds.
pub fn parse_time(name: &str, raw: &str) -> Result<i64, ApiError> {
    parse_time_at(name, raw, now_us())
}

/// [`parse_time`] with a duration counted back from `now`, so that two bounds read in one
/// request are a whole range apart ("last hour" is 3,600,000 ms wide, not a microsecond less).
pub fn parse_time_at(name: &str, raw: &str, now: i64) -> Result<i64, ApiError> {
    let raw = raw.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(raw) {
        return Ok(t.with_timezone(&Utc).timestamp_micros());
    }
    if let Some(d) = parse_duration(raw) {
        return Ok(now - d.as_micros().min(i64::MAX as u128 / 2) as i64);
    }
    Err(ApiError::bad_request(format!("{name}: `{raw}` is neither an RFC 3339 time nor a duration like 15m, 2h, 7d")))
}

/// `90s`, `15m`, `2h`, `7d` (a bare number is seconds).
pub fn parse_duration(raw: &str) -> Option<Duration> {
    let raw = raw.trim();
    let (num, unit) = match raw.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => raw.split_at(i),
        None => (raw, "s"),
    };
    let n: f64 = num.parse().ok()?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        "d" => n * 86400.0,
        "w" => n * 7.0 * 86400.0,
        _ => return None,
    };
    (secs.is_finite() && (0.0..=1e10).contains(&secs)).then(|| Duration::from_secs_f64(secs))
}

async fn get_job(State(state): State<AppState>, PathText(id): PathText) -> Result<Response, ApiError> {
    Ok(Json(state.runtime.job(&id).await?).into_response())
}

async fn cancel(State(state): State<AppState>, caller: Caller, PathText(id): PathText) -> Result<Response, ApiError> {
    Ok(Json(state.runtime.cancel(&id, &caller).await?).into_response())
}

async fn set_priority(State(state): State<AppState>, caller: Caller, PathText(id): PathText, body: RawBody) -> Result<Response, ApiError> {
    let change: PriorityChange = decode(&body)?;
    Ok(Json(state.runtime.set_priority(&id, change.priority, &caller).await?).into_response())
}

/// `?stream=stdout|stderr|both&tail=LINES&follow=true`: plain text; with `follow`, the body
/// stays open and grows until the job ends. `both` joins the streams line by line, stderr
/// lines marked (see [`super::logmux`]).
async fn logs(State(state): State<AppState>, PathText(id): PathText, params: Params) -> Result<Response, ApiError> {
    let streams: &[Stream] = match params.get("stream").unwrap_or("stdout") {
        "stdout" => &[Stream::Stdout],
        "stderr" => &[Stream::Stderr],
        "both" => &[Stream::Stdout, Stream::Stderr],
        other => return Err(ApiError::bad_request(format!("stream: `{other}` is not stdout, stderr or both"))),
    };
    let tail = params.get_i64("tail")?;
    if tail.is_some_and(|t| t < 0) {
        return Err(ApiError::bad_request("tail: must be a number of lines >= 0"));
    }
    let follow = matches!(params.get("follow"), Some("true" | "1" | ""));
    let tail_bytes = Some(tail.map_or(MAX_LOG, |lines| tail_bytes(lines as u64)));
    let mut mux = Mux::default();
    // Read in the follower's order; the job has ended only if it had at the first read.
    let mut reads = Vec::with_capacity(streams.len());
    for i in read_order(streams.len()) {
        reads.push((streams[i], state.runtime.read_log(&id, streams[i], tail_bytes).await?));
    }
    let ended = reads.iter().all(|(_, read)| read.state.is_terminal());
    let run = reads.last().map_or(0, |(_, read)| read.run);
    let (mut first, mut seen) = (Vec::new(), Vec::new());
    for (stream, read) in reads.iter().rev() {
        let shown = match tail {
            Some(lines) => last_lines(&read.bytes, lines as usize),
            None => &read.bytes[..],
        };
        first.extend(if streams.len() == 1 { shown.to_vec() } else { mux.push(*stream, shown) });
        seen.push((*stream, read.bytes.len()));
    }
    let text_plain = [(CONTENT_TYPE, "text/plain; charset=utf-8")];
    if !follow || ended {
        first.extend(mux.finish());
        return Ok((text_plain, first).into_response());
    }
    // Follow: send what is appended, until the job ends.
    let follower = Follower::new(state.runtime.clone(), id, seen, run);
    let single = streams.len() == 1;
    let rest = futures_util::stream::unfold((follower, mux, false), move |(mut f, mut mux, done)| async move {
        if done {
            return None;
        }
        let Some(growth) = f.next().await else { return Some((Ok::<_, std::io::Error>(mux.finish()), (f, mux, true))) };
        let bytes: Vec<u8> = growth.into_iter().flat_map(|g| match g {
            Growth::Bytes(_, b) if single => b,
            Growth::Bytes(stream, b) => mux.push(stream, &b),
            Growth::NewRun(_) => Vec::new(),
        }).collect();
        Some((Ok(bytes), (f, mux, false)))
    });
    let body = futures_util::stream::once(async { Ok(first) }).chain(rest);
    Ok((text_plain, Body::from_stream(body)).into_response())
}

/// How much of a log to read for its last `lines` lines: 4 KB a line, at least 64 KB, at
/// most the whole bounded log.
pub(crate) fn tail_bytes(lines: u64) -> u64 {
    lines.saturating_mul(4096).clamp(64 * 1024, MAX_LOG)
}

pub(crate) fn last_lines(bytes: &[u8], n: usize) -> &[u8] {
    if n == 0 {
        return &[];
    }
    let trimmed = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let mut count = 0;
    for (i, b) in trimmed.iter().enumerate().rev() {
        if *b == b'\n' {
            count += 1;
            if count == n {
                return &bytes[i + 1..];
            }
        }
    }
    bytes
}

async fn submit_stage(State(state): State<AppState>, caller: Caller, body: RawBody) -> Result<Response, ApiError> {
    let req: StageRequest = decode(&body)?;
    Ok((StatusCode::CREATED, Json(state.runtime.submit_stage(req, &caller).await?)).into_response())
}

async fn get_stage(State(state): State<AppState>, PathText(id): PathText) -> Result<Response, ApiError> {
    Ok(Json(state.runtime.stage(&id).await?).into_response())
}

async fn stage_results(State(state): State<AppState>, PathText(id): PathText) -> Result<Response, ApiError> {
    Ok(Json(state.runtime.stage_results(&id).await?).into_response())
}

async fn queues(State(state): State<AppState>) -> Result<Response, ApiError> {
    Ok(Json(json!({ "queues": state.runtime.queues(None).await? })).into_response())
}

async fn queue(State(state): State<AppState>, PathText(name): PathText) -> Result<Response, ApiError> {
    let mut views = state.runtime.queues(Some(name.clone())).await.map_err(|e| match e {
        RuntimeError::Invalid(_) => ApiError::not_found(format!("queue `{name}` is not in the active config")),
        other => other.into(),
    })?;
    Ok(Json(views.remove(0)).into_response())
}

async fn cohorts(State(state): State<AppState>) -> Result<Response, ApiError> {
    Ok(Json(json!({ "cohorts": state.runtime.cohorts(None).await? })).into_response())
}

async fn cohort(State(state): State<AppState>, PathText(name): PathText) -> Result<Response, ApiError> {
    let mut views = state.runtime.cohorts(Some(name.clone())).await.map_err(|e| match e {
        RuntimeError::Invalid(_) => ApiError::not_found(format!("cohort `{name}` is not in the active config")),
        other => other.into(),
    })?;
    Ok(Json(views.remove(0)).into_response())
}

async fn nodes(State(state): State<AppState>) -> Result<Response, ApiError> {
    Ok(Json(json!({ "nodes": state.runtime.nodes().await? })).into_response())
}

/// `?kind=a,b&queue=&job=&preemptor=&since=&until=&order=oldest|newest&cursor=&max_items=`:
/// oldest first from `since` (default), or newest first paging backwards.
async fn events(State(state): State<AppState>, params: Params) -> Result<Response, ApiError> {
    let (filter, cursor, limit) = event_query(&params)?;
    Ok(Json(state.runtime.events(&filter, cursor, limit).await?).into_response())
}

/// The events filter, cursor and page size, shared by the REST API and the dashboard.
pub(crate) fn event_query(params: &Params) -> Result<(EventFilter, Option<i64>, i64), ApiError> {
    let limit = params.page_size(100)?;
    let filter = EventFilter {
        kinds: params.get("kind").map(|k| k.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()).unwrap_or_default(),
        queue: params.get("queue").filter(|s| !s.is_empty()).map(str::to_string),
        job_id: params.get("job").filter(|s| !s.is_empty()).map(str::to_string),
        preemptor: params.get("preemptor").filter(|s| !s.is_empty()).map(str::to_string),
        since_us: params.get("since").map(|t| parse_time("since", t)).transpose()?,
        until_us: params.get("until").map(|t| parse_time("until", t)).transpose()?,
        newest_first: match params.get("order") {
            None | Some("oldest") => false,
            Some("newest") => true,
            Some(other) => return Err(ApiError::bad_request(format!("order: `{other}` is not `oldest` or `newest`"))),
        },
        ..EventFilter::default()
    };
    Ok((filter, params.get_i64("cursor")?, limit))
}

/// Most points per series a history response carries.
const MAX_POINTS: i64 = 2000;

/// `?since=1h&until=&step=&queue=&cohort=&flavor=&resource=`: samples per queue × flavor × resource,
/// at most one per `step` (default: the range / 300).
async fn history(State(state): State<AppState>, params: Params) -> Result<Response, ApiError> {
    let q = history_query(&params)?;
    let samples = state.runtime.history(&q).await?;
    Ok(Json(History { since: time_of(q.since_us), until: time_of(q.until_us), step_s: q.step_us as f64 / 1e6, samples }).into_response())
}

/// The history range, step and series filter, shared by the REST API and the dashboard.
pub(crate) fn history_query(params: &Params) -> Result<HistoryQuery, ApiError> {
    let now = now_us();
    let since = params.get("since").map(|t| parse_time_at("since", t, now)).transpose()?.unwrap_or(now - 3600 * 1_000_000);
    let until = params.get("until").map(|t| parse_time_at("until", t, now)).transpose()?.unwrap_or(now);
    if until <= since {
        return Err(ApiError::bad_request("until: must be later than since"));
    }
    let span = until - since;
    let step = match params.get("step") {
        Some(s) => parse_duration(s).ok_or_else(|| ApiError::bad_request(format!("step: `{s}` is not a duration like 10s, 5m")))?.as_micros() as i64,
        None => (span / 300).max(1_000_000),
    };
    if step <= 0 || span / step > MAX_POINTS {
        return Err(ApiError::bad_request(format!("step: gives more than {MAX_POINTS} points over this range; use a larger step")));
    }
    let q = HistoryQuery {
        since_us: since,
        until_us: until,
        step_us: step,
        queue: params.get("queue").filter(|s| !s.is_empty()).map(str::to_string),
        flavor: params.get("flavor").filter(|s| !s.is_empty()).map(str::to_string),
        resource: params.get("resource").filter(|s| !s.is_empty()).map(str::to_string),
        cohort: params.get("cohort").filter(|s| !s.is_empty()).map(str::to_string),
        queues: Vec::new(),
    };
    Ok(q)
}

/// Seed 001's `TaskData`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskData {
    name: String,
    entrypoint: String,
    #[serde(default)]
    runtime_env: serde_json::Map<String, serde_json::Value>,
    priority: i64,
    cpu: i64,
    gpu: i64,
    memory: i64,
    timeout: i64,
}

async fn add_task(State(state): State<AppState>, caller: Caller, body: RawBody) -> Result<Response, ApiError> {
    let task: TaskData = decode(&body)?;
    if !(0..=9).contains(&task.priority) {
        return Err(invalid(format!("priority: must be 0..9, got {}", task.priority)));
    }
    for (field, v) in [("cpu", task.cpu), ("gpu", task.gpu), ("memory", task.memory), ("timeout", task.timeout)] {
        if v < 0 {
            return Err(invalid(format!("{field}: must be >= 0, got {v}")));
        }
    }
    if task.cpu == 0 && task.gpu == 0 && task.memory == 0 {
        return Err(invalid("task must request at least one resource".into()));
    }
    let runtime_env = serde_json::from_value(serde_json::Value::Object(task.runtime_env))
        .map_err(|e| ApiError::bad_request(format!("runtime_env: {e}")))?;
    let amount = |v: i64| (v > 0).then_some(v as f64);
    let req = JobRequest {
        name: Some(task.name),
        entrypoint: task.entrypoint,
        runtime_env,
        priority: Some(task.priority),
        resources: app::jobs::ResourceRequest { cpu: amount(task.cpu), gpu: amount(task.gpu), memory_gb: amount(task.memory), ..Default::default() },
        timeout_s: task.timeout as u64,
        ..Default::default()
    };
    let job = state.runtime.submit(req, &caller).await?;
    Ok(Json(json!({ "task_id": job.id, "status": "queued", "queue": job.queue, "priority": job.priority })).into_response())
}

fn invalid(message: String) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", message)
}

/// `task_id` (and `priority`) from the JSON body or the query string: mlumina's clients
/// send either.
#[derive(Debug, Default, Deserialize)]
struct TaskRef {
    task_id: Option<String>,
    priority: Option<i64>,
}

fn task_ref(body: &RawBody, params: &Params) -> Result<(String, Option<i64>), ApiError> {
    let mut r: TaskRef = if body.0.iter().all(u8::is_ascii_whitespace) { TaskRef::default() } else { decode(body)? };
    if r.task_id.is_none() {
        r.task_id = params.get("task_id").map(str::to_string);
    }
    if r.priority.is_none() {
        r.priority = params.get_i64("priority")?;
    }
    let id = r.task_id.filter(|s| !s.is_empty()).ok_or_else(|| ApiError::bad_request("task_id: required"))?;
    Ok((id, r.priority))
}

async fn change_task_priority(State(state): State<AppState>, caller: Caller, params: Params, body: RawBody) -> Result<Response, ApiError> {
    let (id, priority) = task_ref(&body, &params)?;
    let priority = priority.ok_or_else(|| ApiError::bad_request("priority: required"))?;
    if !(0..=9).contains(&priority) {
        return Err(invalid(format!("priority: must be 0..9, got {priority}")));
    }
    let job = state.runtime.set_priority(&id, priority, &caller).await?;
    Ok(Json(json!({ "task_id": job.id, "priority": job.priority })).into_response())
}

async fn cancel_task(State(state): State<AppState>, caller: Caller, params: Params, body: RawBody) -> Result<Response, ApiError> {
    let (id, _) = task_ref(&body, &params)?;
    let job = state.runtime.cancel(&id, &caller).await?;
    Ok(Json(json!({ "task_id": job.id, "status": job.state })).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_tails() {
        assert_eq!(parse_duration("15m"), Some(Duration::from_secs(900)));
        assert_eq!(parse_duration("2h"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_duration("30"), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("1y"), None);
        assert_eq!(parse_duration("-5m"), None);
        assert_eq!(last_lines(b"a\nb\nc\n", 2), b"b\nc\n");
        assert_eq!(last_lines(b"a\nb\nc", 5), b"a\nb\nc");
        assert_eq!(last_lines(b"a\nb\n", 0), b"");
    }
}
