//! The read operations on live state: overview, queues, one queue, a queue's workloads and
//! the top consumers, from the runtime's own views (the queue views, the live jobs, the
//! nodes) and the config in force.
//!
//! How Berth's data reads as Anyscale's (docs/anyscale.md has the whole table): a queue's
//! id is its name; a workload is a job, and each job is one node request, so node counts
//! are job counts (`running`: running jobs, `admitted`: admitted and not yet started,
//! `pending`: waiting); a workload's `cluster_id` is the job id, its `plan_id` its current
//! run (`<id>-r<n>`), its `cloud_id` the backend it runs on; quota `ceiling` is the nominal
//! quota, or where that is unlimited the capacity of the nodes the flavor selects. Berth
//! has no markets or projects: those optional fields are left out.

use std::collections::BTreeMap;

use app::api::ConfigVersion;
use app::jobs::{Job, JobState, NodeView, QueueView};
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::query::Query;
use super::{One, Page};
use crate::clock::now_us;
use crate::http::body::PathText;
use crate::http::error::ApiError;
use crate::services::jobs::RuntimeError;
use crate::state::AppState;
use crate::store::jobs::time_of;

/// `NodeCounts`: node requests by state; a Berth job is one.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NodeCounts {
    running: u64,
    admitted: u64,
    pending: u64,
}

/// `WorkloadCounts`: `running` holds quota (admitted or running), `pending` waits.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct WorkloadCounts {
    running: u64,
    pending: u64,
}

impl NodeCounts {
    fn of<'a>(jobs: impl IntoIterator<Item = &'a Job>) -> NodeCounts {
        let mut n = NodeCounts::default();
        for j in jobs {
            match j.state {
                JobState::Running => n.running += 1,
                JobState::Admitted => n.admitted += 1,
                JobState::Pending => n.pending += 1,
                _ => {}
            }
        }
        n
    }

    fn workloads(self) -> WorkloadCounts {
        WorkloadCounts { running: self.running + self.admitted, pending: self.pending }
    }
}

/// `ResourceUsage`: one flavor × resource.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceUsage {
    flavor: String,
    resource: String,
    used: f64,
    ceiling: f64,
    /// `ceiling − used` (negative when more is used than the ceiling, e.g. nodes went away).
    headroom: f64,
    /// `used / ceiling`; 0 when the ceiling is 0.
    utilization: f64,
}

impl ResourceUsage {
    fn new(flavor: &str, resource: &str, used: f64, ceiling: f64) -> ResourceUsage {
        let utilization = if ceiling > 0.0 { used / ceiling } else { 0.0 };
        ResourceUsage { flavor: flavor.into(), resource: resource.into(), used, ceiling, headroom: ceiling - used, utilization }
    }
}

/// Total capacity per (flavor, resource) of the nodes each flavor selects.
fn capacity(nodes: &[NodeView]) -> BTreeMap<(String, String), f64> {
    let mut out = BTreeMap::new();
    for n in nodes {
        for f in &n.flavors {
            for (resource, amount) in &n.capacity {
                *out.entry((f.clone(), resource.clone())).or_insert(0.0) += amount;
            }
        }
    }
    out
}

/// A queue's quota cells: ceiling = nominal, or the flavor's capacity when unlimited.
fn quota(view: &QueueView, caps: &BTreeMap<(String, String), f64>) -> Vec<ResourceUsage> {
    view.usage
        .iter()
        .map(|u| {
            let cap = caps.get(&(u.flavor.clone(), u.resource.clone())).copied().unwrap_or(0.0);
            ResourceUsage::new(&u.flavor, &u.resource, u.used, u.nominal.unwrap_or(cap))
        })
        .collect()
}

/// The stored version in force (`None` for the built-in default).
async fn in_force(state: &AppState) -> Result<Option<ConfigVersion>, ApiError> {
    match state.config.active().version {
        0 => Ok(None),
        v => Ok(Some(state.config.get(Some(v)).await?)),
    }
}

/// A 404 naming the queue, for a queue the active config does not have.
fn unknown_queue(name: &str) -> impl Fn(RuntimeError) -> ApiError + '_ {
    move |e| match e {
        RuntimeError::Invalid(_) => ApiError::not_found(format!("queue `{name}` is not in the active config")),
        other => other.into(),
    }
}

#[derive(Debug, Serialize)]
pub struct Overview {
    totals: Totals,
    utilization: Vec<ResourceUsage>,
    clouds: Vec<Cloud>,
    topology: Topology,
}

#[derive(Debug, Serialize)]
struct Totals {
    nodes: NodeCounts,
    /// Jobs holding quota or waiting for it.
    active_workloads: u64,
    workloads: WorkloadCounts,
}

/// `CloudRollup`: a backend and the jobs placed on it (waiting jobs are on none yet).
#[derive(Debug, Serialize)]
struct Cloud {
    cloud_id: String,
    nodes: NodeCounts,
    workloads: WorkloadCounts,
}

#[derive(Debug, Serialize)]
struct Topology {
    active_queues: usize,
    active_flavors: usize,
    active_rules: usize,
    active_cohorts: usize,
    config_version: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    config_updated_at: Option<DateTime<Utc>>,
}

/// `GET /api/v2/scheduler/overview`.
pub async fn overview(State(state): State<AppState>) -> Result<One<Overview>, ApiError> {
    let jobs = state.runtime.jobs_live(None).await?;
    let queues = state.runtime.queues(None).await?;
    let nodes = state.runtime.nodes().await?;
    let config = in_force(&state).await?;
    let caps = capacity(&nodes);
    // Used per flavor × resource over every queue, against what the flavor's nodes hold.
    let mut used: BTreeMap<(String, String), f64> = BTreeMap::new();
    for u in queues.iter().flat_map(|q| &q.usage) {
        *used.entry((u.flavor.clone(), u.resource.clone())).or_insert(0.0) += u.used;
    }
    let utilization = used.iter().map(|((f, r), u)| ResourceUsage::new(f, r, *u, caps.get(&(f.clone(), r.clone())).copied().unwrap_or(0.0))).collect();
    let mut backends: Vec<String> = nodes.iter().map(|n| n.backend.clone()).chain(jobs.iter().filter_map(|j| j.backend.clone())).collect();
    backends.sort();
    backends.dedup();
    let clouds = backends
        .into_iter()
        .map(|b| {
            let nodes = NodeCounts::of(jobs.iter().filter(|j| j.state.holds_quota() && j.backend.as_deref() == Some(b.as_str())));
            Cloud { cloud_id: b, nodes, workloads: nodes.workloads() }
        })
        .collect();
    let counts = NodeCounts::of(&jobs);
    let cfg = config.as_ref().map(|v| &v.config);
    let mut cohorts: Vec<&str> = cfg.map(|c| c.queues().iter().filter_map(|q| q.cohort_name.as_deref()).collect()).unwrap_or_default();
    cohorts.sort();
    cohorts.dedup();
    let topology = Topology {
        // The built-in default has the one built-in queue, no flavors and no rules.
        active_queues: cfg.map_or(1, |c| c.queues().len()),
        active_flavors: cfg.map_or(0, |c| c.flavors().len()),
        active_rules: cfg.map_or(0, |c| c.rules().len()),
        active_cohorts: cohorts.len(),
        config_version: state.config.active().version,
        config_updated_at: config.as_ref().map(|v| v.created_at),
    };
    let totals = Totals { nodes: counts, active_workloads: jobs.len() as u64, workloads: counts.workloads() };
    Ok(One(Overview { totals, utilization, clouds, topology }))
}

/// `QueueRowResponse`.
#[derive(Debug, Serialize)]
pub struct QueueRow {
    queue_id: String,
    queue: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    cohort: Option<String>,
    workloads: WorkloadCounts,
    nodes: NodeCounts,
    quota: Vec<ResourceUsage>,
}

/// `GET /api/v2/scheduler/queues?limit=&paging_token=`: queues in config order; the token
/// is how many queues earlier pages held.
pub async fn queues(State(state): State<AppState>, query: Query) -> Result<Page<QueueRow>, ApiError> {
    let limit = query.int("limit", 1, 200, 50)? as usize;
    let skip = match query.one("paging_token")? {
        None => 0,
        Some(t) => t.parse::<usize>().map_err(|_| ApiError::bad_request(format!("paging_token: `{t}` is not a token returned by this API")))?,
    };
    let views = state.runtime.queues(None).await?;
    let jobs = state.runtime.jobs_live(None).await?;
    let nodes = state.runtime.nodes().await?;
    let config = in_force(&state).await?;
    let caps = capacity(&nodes);
    let total = views.len();
    let results: Vec<QueueRow> = views
        .iter()
        .skip(skip)
        .take(limit)
        .map(|v| {
            let counts = NodeCounts::of(jobs.iter().filter(|j| j.queue.as_deref() == Some(v.name.as_str())));
            let cohort = config.as_ref().and_then(|c| c.config.queues().iter().find(|q| q.name == v.name)?.cohort_name.clone());
            QueueRow { queue_id: v.name.clone(), queue: v.name.clone(), cohort, workloads: counts.workloads(), nodes: counts, quota: quota(v, &caps) }
        })
        .collect();
    let next = (skip + results.len() < total).then(|| (skip + results.len()).to_string());
    Ok(Page { results, total: Some(total as u64), next })
}

/// `GetQueueResponse`.
#[derive(Debug, Serialize)]
pub struct QueueOne {
    queue: String,
    summary: QueueSummary,
}

#[derive(Debug, Serialize)]
struct QueueSummary {
    running_workloads: u64,
    pending_workloads: u64,
    nodes: NodeCounts,
}

/// `GET /api/v2/scheduler/queues/{queue_id}`; 404 for a queue the active config lacks.
pub async fn queue(State(state): State<AppState>, PathText(name): PathText) -> Result<One<QueueOne>, ApiError> {
    let jobs = state.runtime.jobs_live(Some(name.clone())).await.map_err(unknown_queue(&name))?;
    let nodes = NodeCounts::of(&jobs);
    let w = nodes.workloads();
    Ok(One(QueueOne { queue: name, summary: QueueSummary { running_workloads: w.running, pending_workloads: w.pending, nodes } }))
}

/// `WorkloadResponse`: a job.
#[derive(Debug, Serialize)]
pub struct Workload {
    cluster_id: String,
    name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    priority: i64,
    nodes: WorkloadNodes,
    flavors: Vec<String>,
    /// The backend it runs on; empty while it waits.
    cloud_id: String,
    created_at: DateTime<Utc>,
    status: &'static str,
    /// Its current run, `<id>-r<n>`; empty before its first start.
    plan_id: String,
    /// Its place among the queue's waiting jobs; 0 when it holds quota or is held back.
    queue_position: u64,
    requested_resources: BTreeMap<String, f64>,
    /// Its page on the dashboard (a path on this server).
    url: String,
}

/// `WorkloadNodes`: the one node a job requests, by its state.
#[derive(Debug, Serialize)]
struct WorkloadNodes {
    requested: u64,
    admitted: u64,
    running: u64,
    pending: u64,
}

impl Workload {
    fn of(j: &Job) -> Workload {
        let flag = |s: JobState| u64::from(j.state == s);
        // A waiting job that has run before was preempted or requeued.
        let status = match j.state {
            JobState::Pending if j.runs > 0 => "REQUEUED",
            JobState::Pending => "QUEUED",
            JobState::Admitted => "ADMITTED",
            JobState::Running => "RUNNING",
            _ => "UNSPECIFIED",
        };
        Workload {
            cluster_id: j.id.clone(),
            name: j.name.clone(),
            kind: "JOB",
            priority: j.priority,
            nodes: WorkloadNodes { requested: 1, admitted: flag(JobState::Admitted), running: flag(JobState::Running), pending: flag(JobState::Pending) },
            flavors: j.flavors.iter().map(|f| f.flavor.clone()).collect(),
            cloud_id: j.backend.clone().unwrap_or_default(),
            created_at: j.submitted_at,
            status,
            plan_id: match j.runs {
                0 => String::new(),
                n => format!("{}-r{n}", j.id),
            },
            queue_position: j.position.unwrap_or(0),
            requested_resources: j.resources.iter().map(|(k, v)| (k.to_string(), v)).collect(),
            url: format!("/jobs/{}", j.id),
        }
    }
}

/// `GET /api/v2/scheduler/queues/{queue_id}/workloads?state=pending|running&limit=`:
/// waiting jobs in admission order, or the jobs holding quota (admitted or running) in the
/// order they started.
pub async fn workloads(State(state): State<AppState>, PathText(name): PathText, query: Query) -> Result<Page<Workload>, ApiError> {
    let wanted: fn(JobState) -> bool = match query.one("state")? {
        Some("pending") => |s: JobState| s == JobState::Pending,
        Some("running") => JobState::holds_quota,
        Some(other) => return Err(ApiError::bad_request(format!("state: `{other}` is not pending or running"))),
        None => return Err(ApiError::bad_request("state: required (pending or running)")),
    };
    let limit = query.int("limit", 1, 1000, 100)? as usize;
    let jobs = state.runtime.jobs_live(Some(name.clone())).await.map_err(unknown_queue(&name))?;
    let matching: Vec<&Job> = jobs.iter().filter(|j| wanted(j.state)).collect();
    let total = matching.len() as u64;
    Ok(Page { results: matching.into_iter().take(limit).map(Workload::of).collect(), total: Some(total), next: None })
}

/// `ConsumerResponse`: a running job, by what it holds and for how long.
#[derive(Debug, Serialize)]
pub struct Consumer {
    cluster_id: String,
    name: String,
    nodes: u64,
    duration_seconds: i64,
    url: String,
}

/// `GET /api/v2/scheduler/top-consumers?limit=&queue_id=`: running jobs, the most nodes
/// first (one each), then the longest running.
pub async fn top_consumers(State(state): State<AppState>, query: Query) -> Result<Page<Consumer>, ApiError> {
    let limit = query.int("limit", 1, 100, 10)? as usize;
    let queue = query.one("queue_id")?.map(str::to_string);
    let jobs = match &queue {
        Some(q) => state.runtime.jobs_live(Some(q.clone())).await.map_err(unknown_queue(q))?,
        None => state.runtime.jobs_live(None).await?,
    };
    let now = time_of(now_us());
    let mut running: Vec<Consumer> = jobs
        .iter()
        .filter(|j| j.state == JobState::Running)
        .map(|j| Consumer {
            cluster_id: j.id.clone(),
            name: j.name.clone(),
            nodes: 1,
            duration_seconds: j.started_at.map_or(0, |t| (now - t).num_seconds().max(0)),
            url: format!("/jobs/{}", j.id),
        })
        .collect();
    running.sort_by(|a, b| b.nodes.cmp(&a.nodes).then(b.duration_seconds.cmp(&a.duration_seconds)).then(a.cluster_id.cmp(&b.cluster_id)));
    let total = running.len() as u64;
    running.truncate(limit);
    Ok(Page { results: running, total: Some(total), next: None })
}
