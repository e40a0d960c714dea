//! Server functions: the dashboard's calls into the server's service layer.

use leptos::prelude::*;

use super::json_text::JsonText;

pub use crate::api::{ApplyInput, ApplyOutcome, ChartData, SubmitOutcome};
use crate::api::{ConfigVersion, VersionPage};
use crate::config::diff::ConfigDiff;
use crate::jobs::{CohortView, Event, EventPage, Job, JobPage, NodeView, QueueView, StageResults, StageStatus};
use crate::preview::PreviewReport;

#[cfg(feature = "ssr")]
fn backend() -> Result<super::backend::SharedBackend, ServerFnError> {
    use_context::<super::backend::SharedBackend>().ok_or_else(|| ServerFnError::new("the server provided no backend"))
}

/// Version `version`, or the active config.
#[server(output = JsonText)]
pub async fn get_config(version: Option<i64>) -> Result<ConfigVersion, ServerFnError> {
    backend()?.config(version).await.map_err(ServerFnError::new)
}

/// A page of version summaries, newest first.
#[server(output = JsonText)]
pub async fn list_versions(cursor: Option<String>, max_items: i64) -> Result<VersionPage, ServerFnError> {
    backend()?.versions(cursor, max_items).await.map_err(ServerFnError::new)
}

/// Diff between two versions; `from` defaults to the predecessor of `to`.
#[server(output = JsonText)]
pub async fn get_diff(from: Option<i64>, to: Option<i64>) -> Result<ConfigDiff, ServerFnError> {
    backend()?.diff(from, to).await.map_err(ServerFnError::new)
}

/// Applies the draft, given as canonical YAML.
#[server(output = JsonText)]
pub async fn apply_draft(yaml: String, input: ApplyInput) -> Result<ApplyOutcome, ServerFnError> {
    backend()?.apply(yaml, input).await.map_err(ServerFnError::new)
}

/// What the server's nodes say of a draft (YAML): flavors that select no node, quotas above
/// what the selected nodes have. The one request the editor makes while a draft is edited
/// (validation itself runs in the browser).
#[server(endpoint = "capacity_warnings", output = JsonText)]
pub async fn capacity_warnings(yaml: String) -> Result<Vec<crate::config::Problem>, ServerFnError> {
    backend()?.capacity_warnings(yaml).await.map_err(ServerFnError::new)
}

/// Restores `version` as a new version whose message names it.
#[server(output = JsonText)]
pub async fn rollback_to(version: i64, input: ApplyInput) -> Result<ApplyOutcome, ServerFnError> {
    backend()?.rollback(version, input).await.map_err(ServerFnError::new)
}

/// Every queue with usage, counts, pending and running jobs.
#[server(output = JsonText)]
pub async fn list_queues() -> Result<Vec<QueueView>, ServerFnError> {
    backend()?.queues().await.map_err(ServerFnError::new)
}

/// Pending jobs a queue page lists; the count says how many more wait.
pub const QUEUE_PAGE_PENDING: usize = 200;

/// One queue, its first [`QUEUE_PAGE_PENDING`] pending jobs in admission order and all
/// running ones.
#[server(output = JsonText)]
pub async fn get_queue(name: String) -> Result<QueueView, ServerFnError> {
    let mut view = backend()?.queue(name).await.map_err(ServerFnError::new)?;
    view.pending.truncate(QUEUE_PAGE_PENDING);
    Ok(view)
}

/// Every cohort with its members' use, borrowing, lending and shares.
#[server(output = JsonText)]
pub async fn list_cohorts() -> Result<Vec<CohortView>, ServerFnError> {
    backend()?.cohorts().await.map_err(ServerFnError::new)
}

/// One cohort.
#[server(output = JsonText)]
pub async fn get_cohort(name: String) -> Result<CohortView, ServerFnError> {
    backend()?.cohort(name).await.map_err(ServerFnError::new)
}

/// Which replica runs the admission loop.
#[server(output = JsonText)]
pub async fn get_leader() -> Result<String, ServerFnError> {
    backend()?.leader().await.map_err(ServerFnError::new)
}

/// Every node of every backend.
#[server(output = JsonText)]
pub async fn list_nodes() -> Result<Vec<NodeView>, ServerFnError> {
    backend()?.nodes().await.map_err(ServerFnError::new)
}

/// A page of jobs; `query` holds `GET /api/v1/jobs` parameters.
#[server(output = JsonText)]
pub async fn list_jobs(query: String) -> Result<JobPage, ServerFnError> {
    backend()?.jobs(query).await.map_err(ServerFnError::new)
}

/// One job with its history, and the preemptions it caused (newest first).
#[server(output = JsonText)]
pub async fn get_job(id: String) -> Result<(Job, Vec<Event>), ServerFnError> {
    let backend = backend()?;
    let job = backend.job(id.clone()).await.map_err(ServerFnError::new)?;
    let caused = backend.events(format!("preemptor={id}&order=newest&max_items=100")).await.map_err(ServerFnError::new)?;
    Ok((job, caused.events))
}

/// The last `tail` lines of a job's stdout (or stderr).
#[server(output = JsonText)]
pub async fn job_logs(id: String, stderr: bool, tail: u64) -> Result<String, ServerFnError> {
    backend()?.logs(id, stderr, tail).await.map_err(ServerFnError::new)
}

/// Cancels a job.
#[server(output = JsonText)]
pub async fn cancel_job(id: String) -> Result<Job, ServerFnError> {
    backend()?.cancel(id).await.map_err(ServerFnError::new)
}

/// Changes a job's priority.
#[server(output = JsonText)]
pub async fn change_priority(id: String, priority: i64) -> Result<Job, ServerFnError> {
    backend()?.set_priority(id, priority).await.map_err(ServerFnError::new)
}

/// Who is signed in (`None` when nobody is).
#[server(output = JsonText)]
pub async fn whoami() -> Result<Option<crate::auth::Whoami>, ServerFnError> {
    Ok(backend()?.whoami())
}

/// Every API token, newest first.
#[server(output = JsonText)]
pub async fn list_tokens() -> Result<Vec<crate::auth::TokenInfo>, ServerFnError> {
    backend()?.tokens().await.map_err(ServerFnError::new)
}

/// Creates a token; the answer holds its secret, shown once.
#[server(output = JsonText)]
pub async fn create_token(user: String, role: crate::auth::Role, label: Option<String>) -> Result<crate::auth::CreatedToken, ServerFnError> {
    let new = crate::auth::NewToken { user, role, label };
    backend()?.create_token(new).await.map_err(ServerFnError::new)
}

/// Revokes a token.
#[server(output = JsonText)]
pub async fn revoke_token(id: String) -> Result<crate::auth::TokenInfo, ServerFnError> {
    backend()?.revoke_token(id).await.map_err(ServerFnError::new)
}

/// A page of the audit log; `query` holds `GET /api/v1/audit` parameters.
#[server(output = JsonText)]
pub async fn list_audit(query: String) -> Result<crate::auth::AuditPage, ServerFnError> {
    backend()?.audit(query).await.map_err(ServerFnError::new)
}

/// Submits a job given as JSON (the REST API's body).
#[server(output = JsonText)]
pub async fn submit_job(request: String) -> Result<SubmitOutcome, ServerFnError> {
    let request: crate::jobs::JobRequest = match serde_json::from_str(&request) {
        Ok(r) => r,
        Err(e) => return Ok(SubmitOutcome::Invalid(e.to_string())),
    };
    backend()?.submit(request).await.map_err(ServerFnError::new)
}

/// A page of events; `query` holds `GET /api/v1/events` parameters.
#[server(output = JsonText)]
pub async fn list_events(query: String) -> Result<EventPage, ServerFnError> {
    backend()?.events(query).await.map_err(ServerFnError::new)
}

/// Usage charts over `GET /api/v1/history` parameters, one per resource: usage and quota
/// lines per queue and flavor, or with `stacked`, one stacked area per queue with the sum of
/// their quotas and the capacity of the nodes their flavors select.
#[server(output = JsonText)]
pub async fn usage_chart(query: String, stacked: bool) -> Result<Vec<ChartData>, ServerFnError> {
    let backend = backend()?;
    let history = backend.history(query).await.map_err(ServerFnError::new)?;
    let capacity = if stacked { capacity_of(&backend.nodes().await.map_err(ServerFnError::new)?, &history) } else { Default::default() };
    Ok(super::charts::usage(&history, stacked, &capacity))
}

/// What the nodes selected by any flavor of `history` hold, per resource (each node once).
#[cfg(feature = "ssr")]
fn capacity_of(nodes: &[NodeView], history: &crate::jobs::History) -> super::charts::Capacity {
    let flavors: std::collections::BTreeSet<&str> = history.samples.iter().map(|s| s.flavor.as_str()).collect();
    let mut total = super::charts::Capacity::new();
    for node in nodes.iter().filter(|n| n.flavors.iter().any(|f| flavors.contains(f.as_str()))) {
        for (resource, amount) in &node.capacity {
            *total.entry(resource.clone()).or_default() += amount;
        }
    }
    total
}

/// A queue's waiting times (p50, p95) and admissions over a range (`queue=&since=&until=`).
#[server(output = JsonText)]
pub async fn queue_waits(query: String) -> Result<(ChartData, ChartData), ServerFnError> {
    let admissions = backend()?.admissions(query).await.map_err(ServerFnError::new)?;
    Ok((super::charts::waits(&admissions), super::charts::admissions(&admissions)))
}

/// The accounting report (`GET /api/v1/usage` parameters: `by`, `since`, `until`).
#[server(output = JsonText)]
pub async fn usage_report(query: String) -> Result<crate::jobs::UsageReport, ServerFnError> {
    backend()?.usage(query).await.map_err(ServerFnError::new)
}

/// How far the preview started with `token` has got: `(done, total)` arrivals over both
/// replays, or `None` once it has ended (or before it has started).
#[server(output = JsonText)]
pub async fn preview_progress(token: String) -> Result<Option<(u64, u64)>, ServerFnError> {
    Ok(backend()?.preview_progress(token))
}

/// A stage's progress and results.
#[server(output = JsonText)]
pub async fn get_stage(id: String) -> Result<(StageStatus, StageResults), ServerFnError> {
    backend()?.stage(id).await.map_err(ServerFnError::new)
}

/// What the draft (YAML) would have done to the recorded `window`, next to the active config.
/// The browser aborts the request when the caller drops the future, and the server then stops
/// the replay.
#[server(output = JsonText)]
pub async fn preview_draft(yaml: String, window: String, token: String) -> Result<(PreviewReport, ChartData), ServerFnError> {
    let report = backend()?.preview(yaml, window, token).await.map_err(ServerFnError::new)?;
    let chart = super::charts::preview_waits(&report, crate::preview::queue_label);
    Ok((report, chart))
}
