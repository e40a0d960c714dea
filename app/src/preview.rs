//! The what-if preview's wire types: a draft config replayed against recorded workload.
//!
//! `POST /api/v1/scheduler/config/preview` takes a [`PreviewRequest`] and answers a
//! [`PreviewReport`]: the recorded jobs of a window replayed in simulated time under the
//! active config and under the draft, from the same starting state, side by side. Pure data,
//! wasm-safe: the editor's "Preview impact" panel reads the same types the CLI prints.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Body of a preview: the draft (a config object, or its YAML or JSON text, as apply takes
/// it) and the window of recorded workload (default: the last 24 hours).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreviewRequest {
    pub config: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Window>,
}

/// Which recorded workload to replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Window {
    /// The last `24h` (also `90m`, `7d`, `3600s`) up to now.
    Last(String),
    /// Jobs submitted in `[from, to)`.
    Range { from: DateTime<Utc>, to: DateTime<Utc> },
}

/// The impact report: active config vs draft over one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreviewReport {
    /// Replayed jobs were submitted in `[from, to)`.
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// The active config's version, the "before" side.
    pub active_version: i64,
    /// The draft is the active config (the two sides are the same replay).
    pub identical: bool,
    /// Jobs submitted in the window.
    pub jobs: u64,
    /// Jobs submitted before the window and still holding quota at its start (both sides
    /// start with them, in the queue and on the node they really had).
    pub running_at_start: u64,
    /// Jobs submitted before the window and still waiting at its start.
    pub pending_at_start: u64,
    /// Jobs whose runtime is not on record (never ran, or still running), so estimated.
    pub estimated_runtimes: u64,
    /// Per queue of either config; the row with `queue: None` holds jobs no rule matched.
    pub queues: Vec<QueueImpact>,
    /// Usage vs quota over time per queue × flavor × resource, in `usage_step_s` buckets
    /// from `from` (time-weighted averages).
    pub usage: Vec<UsageImpact>,
    pub usage_step_s: f64,
    /// How many jobs changed fate, per kind.
    pub change_counts: Vec<KindCount>,
    /// The jobs whose fate changes (the most significant first), at most `MAX_CHANGES`.
    pub changes: Vec<FateChange>,
    /// More changes than listed.
    pub changes_truncated: bool,
    /// What applying the draft now would do to the jobs live at this moment.
    pub now: NowImpact,
    /// How well the active-config replay matches what really happened.
    pub fidelity: Fidelity,
    /// Where node capacity comes from, and other caveats, one sentence each.
    pub notes: Vec<String>,
    /// Server time spent on the preview.
    pub elapsed_ms: u64,
}

/// Most changed jobs listed in a report.
pub const MAX_CHANGES: usize = 1000;

/// One queue, both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueImpact {
    /// `None`: jobs no scheduling rule matched.
    pub queue: Option<String>,
    pub in_active: bool,
    pub in_draft: bool,
    pub active: QueueStats,
    pub draft: QueueStats,
}

/// What one replay did in one queue.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueStats {
    /// Jobs routed here (rejected ones included).
    pub jobs: u64,
    /// Jobs admitted at least once.
    pub admitted: u64,
    /// Jobs rejected at submit, with the reasons (they name the rule or bound).
    pub rejected: u64,
    pub rejections: Vec<ReasonCount>,
    /// Jobs whose requested priority the rule's policy clamped into its bounds.
    pub clamped: u64,
    /// Preemptions suffered by jobs of this queue (a job preempted twice counts twice).
    pub preempted: u64,
    /// Admitted jobs' wait from submit to their last admission; jobs never admitted count
    /// with their wait so far at the replay's end (a lower bound), so starving shows.
    pub wait_p50_s: Option<f64>,
    pub wait_p95_s: Option<f64>,
    pub wait_max_s: Option<f64>,
    pub wait_mean_s: Option<f64>,
    /// Never admitted by the end of the replay.
    pub never_admitted: u64,
    /// Cancelled by their users (as recorded) before they finished.
    pub withdrawn: u64,
    /// Jobs whose (last) admission borrowed from the queue's cohort.
    #[serde(default)]
    pub borrowed: u64,
    /// Who lent to them: cohort peers, with how many of those jobs each lent to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lenders: Vec<LenderCount>,
    /// Jobs of cohort peers this queue lent to.
    #[serde(default)]
    pub lent: u64,
}

impl QueueStats {
    /// `12 jobs borrowed from the cohort (lent by team-b: 12); lent to 3 jobs of peers`, or
    /// `None` when the queue neither borrowed nor lent.
    pub fn cohort_summary(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.borrowed > 0 {
            let by: Vec<String> = self.lenders.iter().map(|l| format!("{}: {}", l.queue, l.jobs)).collect();
            parts.push(format!("{} jobs borrowed from the cohort (lent by {})", self.borrowed, by.join(", ")));
        }
        if self.lent > 0 {
            parts.push(format!("lent to {} jobs of peers", self.lent));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// A lending queue and how many borrowing jobs it lent to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LenderCount {
    pub queue: String,
    pub jobs: u64,
}

/// A reason and how many jobs gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasonCount {
    pub reason: String,
    pub count: u64,
}

/// One quota cell's usage over time, both sides (amounts in units).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageImpact {
    pub queue: String,
    pub flavor: String,
    pub resource: String,
    /// `None`: unlimited (or the cell does not exist on that side).
    pub active_nominal: Option<f64>,
    pub draft_nominal: Option<f64>,
    pub active: Vec<f64>,
    pub draft: Vec<f64>,
    pub active_peak: f64,
    pub draft_peak: f64,
}

/// How a job's fate differs under the draft.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Rejected under the draft, accepted under the active config.
    Rejected,
    /// Accepted under the draft, rejected under the active config.
    Accepted,
    /// Admitted under the active config, never under the draft.
    NeverAdmitted,
    /// Never admitted under the active config, admitted under the draft.
    Admitted,
    /// Another queue.
    Rerouted,
    /// Another effective priority (clamped instead of rejected, or other bounds).
    Reprioritized,
    /// Preempted more often under the draft.
    Preempted,
    /// Preempted less often under the draft.
    Spared,
    /// Waits at least a minute and half again longer.
    Later,
    /// Waits at least a minute and a third shorter.
    Sooner,
}

impl ChangeKind {
    /// Lower sorts first: how much a person needs to see it.
    pub fn rank(self) -> u8 {
        self as u8
    }

    /// A short phrase for tables.
    pub fn label(self) -> &'static str {
        match self {
            ChangeKind::Rejected => "would be rejected",
            ChangeKind::Accepted => "would be accepted",
            ChangeKind::NeverAdmitted => "would never be admitted",
            ChangeKind::Admitted => "would be admitted",
            ChangeKind::Rerouted => "other queue",
            ChangeKind::Reprioritized => "other priority",
            ChangeKind::Preempted => "preempted more",
            ChangeKind::Spared => "preempted less",
            ChangeKind::Later => "waits longer",
            ChangeKind::Sooner => "waits less",
        }
    }
}

/// A kind of change and how many jobs it applies to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindCount {
    pub kind: ChangeKind,
    pub count: u64,
}

/// One job whose fate changes, with what happened on each side in a sentence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FateChange {
    pub job_id: String,
    pub name: String,
    pub kind: ChangeKind,
    pub active: String,
    pub draft: String,
    /// Wait on each side in seconds, when admitted.
    pub active_wait_s: Option<f64>,
    pub draft_wait_s: Option<f64>,
}

/// The present moment under the draft: jobs keep running where they are (an apply never
/// stops a running job by itself); waiting jobs are routed again; one admission cycle under
/// the draft says what it would start and whom it would preempt.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NowImpact {
    /// Jobs admitted or running now.
    pub running: u64,
    /// Jobs waiting now.
    pub pending: u64,
    /// Quota cells the running jobs already exceed under the draft.
    pub over_quota: Vec<OverQuota>,
    /// Running jobs the first cycle under the draft would preempt.
    pub preempted: Vec<NowPreemption>,
    /// Waiting jobs the first cycle under the draft would admit (and under the active
    /// config).
    pub would_admit: u64,
    pub would_admit_active: u64,
    /// Running jobs the draft routes differently (they stay where they run).
    pub rerouted: Vec<NowJob>,
}

/// A quota cell already over the draft's nominal quota.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverQuota {
    pub queue: String,
    pub flavor: String,
    pub resource: String,
    pub used: f64,
    pub active_nominal: Option<f64>,
    pub draft_nominal: f64,
    /// The running jobs charged there.
    pub jobs: Vec<String>,
    /// What happens to them, in a sentence.
    pub consequence: String,
}

/// A running job the draft would preempt at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NowPreemption {
    pub job_id: String,
    pub queue: String,
    pub priority: i64,
    pub preemptor: String,
}

/// A live job and what the draft says about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NowJob {
    pub job_id: String,
    pub queue: String,
    pub what: String,
}

/// The active-config replay against the record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fidelity {
    /// Jobs compared for wait: admitted in the record (no retries) and in the replay.
    pub compared: u64,
    /// Mean absolute error of the wait, replay vs record, in seconds.
    pub wait_mae_s: Option<f64>,
    pub actual_wait_mean_s: Option<f64>,
    pub replayed_wait_mean_s: Option<f64>,
    /// Share of jobs whose accepted/rejected outcome matches the record (0..1).
    pub outcome_agreement: Option<f64>,
    /// Jobs recorded under another config version than the active one (the replay routes
    /// them by the active config, so they may differ for that reason alone).
    pub other_versions: u64,
}

/// A queue as the preview names it: `(no rule matches)`, or marked `(new)` or `(removed)`
/// when only the draft or only the active config has it.
pub fn queue_label(q: &QueueImpact) -> String {
    match (&q.queue, q.in_active, q.in_draft) {
        (None, _, _) => "(no rule matches)".into(),
        (Some(n), true, false) => format!("{n} (removed)"),
        (Some(n), false, true) => format!("{n} (new)"),
        (Some(n), _, _) => n.clone(),
    }
}
