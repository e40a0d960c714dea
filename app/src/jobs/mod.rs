//! Wire types of jobs, stages, queues, nodes, events and resource history: what the REST API
//! sends and takes, shared by the server, the CLI and the dashboard (wasm-safe).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

mod stages;
mod usage;

pub use stages::*;
pub use usage::*;

/// Lifecycle of a job (PRODUCT.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Pending,
    Admitted,
    Running,
    Succeeded,
    Failed,
    Cancelled,
    TimedOut,
    Rejected,
}

impl JobState {
    /// Every state, in lifecycle order.
    pub const ALL: [JobState; 8] = [
        JobState::Pending,
        JobState::Admitted,
        JobState::Running,
        JobState::Succeeded,
        JobState::Failed,
        JobState::Cancelled,
        JobState::TimedOut,
        JobState::Rejected,
    ];

    /// The name used in the API, the database and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Admitted => "admitted",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
            JobState::TimedOut => "timed_out",
            JobState::Rejected => "rejected",
        }
    }

    /// Parses [`as_str`](Self::as_str)'s names.
    pub fn parse(s: &str) -> Option<JobState> {
        JobState::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// True once nothing more will happen to the job.
    pub fn is_terminal(self) -> bool {
        matches!(self, JobState::Succeeded | JobState::Failed | JobState::Cancelled | JobState::TimedOut | JobState::Rejected)
    }

    /// True while the job holds quota (admitted or running).
    pub fn holds_quota(self) -> bool {
        matches!(self, JobState::Admitted | JobState::Running)
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a job asks for. `cpu`, `gpu` and `memory_gb` are the common names; `custom` holds any
/// other resource a flavor's nodes offer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_gb: Option<f64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub custom: BTreeMap<String, f64>,
}

impl ResourceRequest {
    /// `(name, amount)` for every resource named, custom ones included.
    pub fn iter(&self) -> impl Iterator<Item = (&str, f64)> + '_ {
        [("cpu", self.cpu), ("gpu", self.gpu), ("memory_gb", self.memory_gb)]
            .into_iter()
            .filter_map(|(n, a)| a.map(|a| (n, a)))
            .chain(self.custom.iter().map(|(n, a)| (n.as_str(), *a)))
    }
}

/// Ray's `runtime_env`: `working_dir` and `env_vars` are used by every backend; other keys
/// (`pip`, `conda`, …) are kept and passed to backends that understand them.
///
/// `working_dir` is an absolute directory on the server's host, or the URI of a package
/// uploaded to Berth (`gcs://_ray_pkg_<hash>.zip`, what `ray job submit --working-dir`
/// sends), which every backend delivers: unpacked into the run's directory, or uploaded to
/// the Ray cluster. `py_modules` may list such packages too.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RuntimeEnv {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env_vars: BTreeMap<String, String>,
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// Body of `POST /api/v1/jobs`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobRequest {
    /// Shown in lists; defaults to the submission id, else the first word of the entrypoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A second id the caller chooses, unique among all jobs (Ray's `submission_id`): the job
    /// can be read, stopped and searched for by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submission_id: Option<String>,
    /// Shell command line, run with `/bin/sh -c`.
    pub entrypoint: String,
    #[serde(default)]
    pub runtime_env: RuntimeEnv,
    /// Matched by the scheduling rules' selectors.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Requested priority; the routing rule's policy may default, clamp or reject it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    #[serde(default)]
    pub resources: ResourceRequest,
    /// Seconds of running before the job is stopped as `timed_out`; 0 = no limit.
    #[serde(default)]
    pub timeout_s: u64,
    /// How many times a failed run is retried.
    #[serde(default)]
    pub max_retries: u32,
    /// Files (relative to the working directory) collected as the job's outputs when it
    /// ends; used by stages.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<String>,
    /// Jobs it waits for (ids, submission ids or stage ids: a stage stands for its jobs),
    /// each of which must succeed (sbatch `--dependency=afterok`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after_ok: Vec<String>,
    /// Jobs it waits for, which may end in any way (`afterany`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after_any: Vec<String>,
    /// Jobs it waits for, each of which must fail, time out or be cancelled (`afternotok`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after_not_ok: Vec<String>,
    /// Submit it held: it waits, never admitted, until released.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hold: bool,
    /// Who holds it (kept by Berth: the submitter for `hold`, else whoever held it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_by: Option<String>,
}

/// How a job's end meets a dependency on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DependencyKind {
    AfterOk,
    AfterAny,
    AfterNotOk,
}

impl DependencyKind {
    /// The request field that lists such dependencies.
    pub fn field(self) -> &'static str {
        match self {
            DependencyKind::AfterOk => "after_ok",
            DependencyKind::AfterAny => "after_any",
            DependencyKind::AfterNotOk => "after_not_ok",
        }
    }

    /// Whether a job that ended in `state` meets it (`Some(true)`), never can
    /// (`Some(false)`), or has not ended yet (`None`).
    pub fn met_by(self, state: JobState) -> Option<bool> {
        if !state.is_terminal() {
            return None;
        }
        let ok = state == JobState::Succeeded;
        Some(match self {
            DependencyKind::AfterOk => ok,
            DependencyKind::AfterAny => true,
            DependencyKind::AfterNotOk => !ok && state != JobState::Rejected,
        })
    }
}

impl JobRequest {
    /// Every dependency, in field order.
    pub fn dependencies(&self) -> impl Iterator<Item = (DependencyKind, &String)> {
        let ok = self.after_ok.iter().map(|id| (DependencyKind::AfterOk, id));
        let any = self.after_any.iter().map(|id| (DependencyKind::AfterAny, id));
        ok.chain(any).chain(self.after_not_ok.iter().map(|id| (DependencyKind::AfterNotOk, id)))
    }
}

/// The flavor a job's resources were charged to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlavorUse {
    pub flavor: String,
    pub resources: Vec<String>,
}

/// A job as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub id: String,
    /// The caller's own id for it (Ray's `submission_id`), when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submission_id: Option<String>,
    pub name: String,
    pub submitter: String,
    pub state: JobState,
    pub entrypoint: String,
    pub runtime_env: RuntimeEnv,
    pub labels: BTreeMap<String, String>,
    pub resources: ResourceRequest,
    /// Effective priority (after the rule's policy).
    pub priority: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_priority: Option<i64>,
    pub timeout_s: u64,
    pub max_retries: u32,
    /// Retries used so far.
    pub retries: u32,
    /// Starts so far (retries and restarts after preemption each add one).
    pub runs: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Index of the scheduling rule that routed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_index: Option<i64>,
    /// Config version in force when it was routed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_version: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flavors: Vec<FlavorUse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    pub submitted_at: DateTime<Utc>,
    /// Its place in line: kept across preemptions.
    pub enqueued_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admitted_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// Why it waits (pending), or why it ended (rejected, failed, timed out…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// While pending, `reason` in one line for people ("Waiting for CPU: 2 of 2 in use in
    /// vision; nothing of lower priority to preempt"), built by the engine from the same facts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_headline: Option<String>,
    /// 1-based place among its queue's waiting jobs, while pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<String>,
    /// Jobs it waits for (see [`JobRequest::after_ok`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after_ok: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after_any: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after_not_ok: Vec<String>,
    /// Who holds it, while held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_by: Option<String>,
    /// Jobs that wait for this one (only on `GET /api/v1/jobs/{id}`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependents: Vec<String>,
    /// Its events, oldest first (only on `GET /api/v1/jobs/{id}`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Event>,
}

/// A page of jobs, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobPage {
    pub jobs: Vec<Job>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Body of `POST /api/v1/jobs/{id}/priority`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriorityChange {
    pub priority: i64,
}

/// Something that happened, in the order it happened (`seq`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub seq: i64,
    pub at: DateTime<Utc>,
    /// `submitted`, `rejected`, `admitted`, `started`, `preempted`, `timed_out`, `retried`,
    /// `finished`, `cancelled`, `priority_changed`, `config_applied`, `lost`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_version: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_index: Option<i64>,
    pub message: String,
    /// Kind-specific facts, e.g. a preemption's preemptor and victims with priorities.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub detail: serde_json::Value,
    /// The name of the event's job, to show next to its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_name: Option<String>,
}

/// A page of events, oldest first; `next_cursor` continues after the last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventPage {
    pub events: Vec<Event>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// One cell of a queue's quota: usage vs nominal for a flavor and resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaUsage {
    pub flavor: String,
    pub resource: String,
    pub used: f64,
    /// `None`: unlimited; `Some(0.0)`: blocked.
    pub nominal: Option<f64>,
    /// In a cohort: the part of `used` above `nominal`, borrowed from peers.
    #[serde(default)]
    pub borrowed: f64,
    /// In a cohort: the part of the cohort's borrowing this queue's idle quota carries.
    #[serde(default)]
    pub lent: f64,
    /// In a cohort: how much of the nominal quota peers may borrow (`None`: unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lendable: Option<f64>,
    /// In a cohort: how far above nominal the queue may borrow (`None`: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowing_limit: Option<f64>,
}

impl QuotaUsage {
    /// Use within the nominal quota (all of it outside a cohort).
    pub fn within_nominal(&self) -> f64 {
        self.used - self.borrowed
    }
}

/// `GET /api/v1/cohorts` and `/api/v1/cohorts/{name}`: queues that pool their unused quota.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CohortView {
    pub name: String,
    /// Some member set `fair_sharing_weight`: borrowers are ordered by weighted share.
    pub fair_sharing: bool,
    pub members: Vec<CohortMember>,
    /// Per flavor and resource: what members lend, what of it is in use, what is borrowed.
    pub pools: Vec<CohortPool>,
}

/// One queue of a cohort: its cells (nominal, use, borrowed, lent) and its share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CohortMember {
    pub queue: String,
    pub usage: Vec<QuotaUsage>,
    pub pending_count: u64,
    pub running_count: u64,
    /// Fair-sharing weight (1 unless set).
    pub weight: f64,
    /// Kueue's dominant resource share, in percent: of the resource it borrows most of, what
    /// it borrows over what the cohort can lend, divided by its weight. 0 when it borrows
    /// nothing; `None` for a borrowing member of weight 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
}

/// One flavor × resource of a cohort.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CohortPool {
    pub flavor: String,
    pub resource: String,
    /// What the members lend together (`None`: unlimited).
    pub lendable: Option<f64>,
    /// Sum of the members' nominal quotas (`None`: one is unlimited).
    pub nominal: Option<f64>,
    /// In use by all members.
    pub used: f64,
    /// Used above the members' nominal quotas.
    pub borrowed: f64,
    /// Lendable quota no one uses (`None`: unlimited): what a member may still borrow.
    pub idle: Option<f64>,
}

/// A pending job in a queue view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueuedJob {
    pub id: String,
    pub name: String,
    pub priority: i64,
    pub position: u64,
    pub enqueued_at: DateTime<Utc>,
    pub reason: String,
    /// `reason` in one line for people (see [`Job::reason_headline`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_headline: Option<String>,
}

/// A running (or admitted) job in a queue view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunningEntry {
    pub id: String,
    pub name: String,
    pub priority: i64,
    pub state: JobState,
    pub flavors: Vec<FlavorUse>,
    pub node: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
}

/// `GET /api/v1/queues` and `/api/v1/queues/{name}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueView {
    pub name: String,
    pub preemption: String,
    /// The cohort it pools unused quota with, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cohort: Option<String>,
    pub usage: Vec<QuotaUsage>,
    pub pending_count: u64,
    pub running_count: u64,
    /// Since the oldest pending job was enqueued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub longest_wait_s: Option<f64>,
    /// Waiting jobs in admission order (the queue page; the list view leaves it empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<QueuedJob>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub running: Vec<RunningEntry>,
}

/// A node a backend offers (`GET /api/v1/nodes`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeView {
    pub id: String,
    pub backend: String,
    pub labels: BTreeMap<String, String>,
    pub capacity: BTreeMap<String, f64>,
    /// Capacity minus what admitted and running jobs hold and what `used_outside` takes.
    pub free: BTreeMap<String, f64>,
    /// Flavors whose selector matches this node.
    pub flavors: Vec<String>,
    /// In use by work Berth did not start (another user's jobs on a shared Ray cluster), as
    /// the backend's last report shows it; Berth does not admit onto it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub used_outside: BTreeMap<String, f64>,
    /// What the backend itself last reported in use here (all work, Berth's included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported: Option<ReportedUse>,
}

/// A backend's own usage figures for one node (Ray's `/api/cluster_status`, refreshed by
/// Ray about every 5 s).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportedUse {
    /// When the backend took them.
    pub at: DateTime<Utc>,
    pub used: BTreeMap<String, f64>,
}

/// One resource-history sample (`GET /api/v1/history`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub at: DateTime<Utc>,
    pub queue: String,
    pub flavor: String,
    pub resource: String,
    pub used: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nominal: Option<f64>,
    /// The part of `used` above `nominal`, borrowed from the queue's cohort.
    #[serde(default)]
    pub borrowed: f64,
}

/// `GET /api/v1/history`: the range, the step it was downsampled to, and the samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct History {
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
    pub step_s: f64,
    pub samples: Vec<Sample>,
}
