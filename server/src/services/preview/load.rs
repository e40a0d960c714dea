//! Step 1 of a preview: the recorded workload of a window, as the simulator's arrivals.
//!
//! Each recorded job becomes one [`Arrival`] routed by its labels and requested priority (so
//! each side routes it with its own rules), arriving at its submit time and running for its
//! recorded runtime: `finished_at − started_at` of its last run. Jobs from before the window
//! that still held quota at its start enter as [`Submit::Running`] in the queue, flavors and
//! node they really had (the same for both sides); jobs from before it still waiting arrive
//! at the start with their own enqueue time. A job cancelled while it waited is withdrawn at
//! its cancel time. A runtime that is not on record (never ran: rejected, cancelled or still
//! waiting; or still running, so only a lower bound) is estimated: the median runtime of
//! finished jobs with the same labels, else of all finished jobs, else one minute — capped
//! by the job's timeout.

use std::collections::HashMap;

use app::jobs::JobState;

use crate::engine::sim::{Arrival, Submit};
use crate::engine::{FlavorAssignment, Labels, Name};
use crate::services::request;
use crate::store::jobs::{JobRow, JobStore, JobStoreError};

use super::window::Span;

/// Runtime assumed when nothing finished in the window to learn from.
const FALLBACK_RUNTIME_MS: i64 = 60_000;

/// What really happened to a job, for fidelity and for naming it in the report.
#[derive(Debug, Clone)]
pub struct Record {
    pub name: String,
    /// Requested priority (to tell a clamp from a pass-through).
    pub requested_priority: Option<i64>,
    /// Already holding quota at the window's start: not part of the comparison.
    pub running_at_start: bool,
    pub rejected: bool,
    /// Wait to its last admission, when it was admitted and never retried.
    pub wait_ms: Option<i64>,
    pub config_version: Option<i64>,
}

/// The replay's input.
#[derive(Debug, Default)]
pub struct Workload {
    pub arrivals: Vec<Arrival>,
    /// Parallel to `arrivals`.
    pub records: Vec<Record>,
    pub running_at_start: u64,
    pub pending_at_start: u64,
    pub estimated_runtimes: u64,
    /// Rows whose request no longer passes the request checks (left out).
    pub unreadable: u64,
}

/// Reads the window's jobs from the store; `now_us`, or the window's end if that is earlier,
/// bounds runtimes of jobs still running: a job is seen as it stood when the window closed,
/// so the same window reads the same however much later it is asked again.
pub async fn workload(store: &JobStore, span: Span, now_us: i64) -> Result<Workload, JobStoreError> {
    let now_us = now_us.min(span.to_us);
    let mut w = Workload::default();
    let mut unknown: Vec<(usize, u64)> = Vec::new();
    let mut known: HashMap<Labels, Vec<i64>> = HashMap::new();
    store
        .for_each_in_window(span.from_us, span.to_us, |row| {
            if let Some((arrival, record, runtime)) = convert(&row, span, now_us, &mut w) {
                match runtime {
                    Runtime::Known(ms) => known.entry(row.spec.labels.clone()).or_default().push(ms),
                    Runtime::Unknown => unknown.push((w.arrivals.len(), row.spec.timeout_s)),
                    Runtime::AtLeast => w.estimated_runtimes += 1,
                }
                w.arrivals.push(arrival);
                w.records.push(record);
            }
        })
        .await?;
    estimate(&mut w, &unknown, &mut known);
    Ok(w)
}

enum Runtime {
    /// Finished: its last run's duration.
    Known(i64),
    /// Still running: the time so far.
    AtLeast,
    /// Never ran: to be estimated.
    Unknown,
}

fn convert(row: &JobRow, span: Span, now_us: i64, w: &mut Workload) -> Option<(Arrival, Record, Runtime)> {
    let Ok(request) = request::check(&row.spec) else {
        w.unreadable += 1;
        return None;
    };
    let ms = |us: i64| us.div_euclid(1000);
    let before = row.submitted_at_us < span.from_us;
    let admitted = row.admitted_at_us.filter(|_| row.state != JobState::Rejected);
    let ran = row.started_at_us.or(admitted);
    let (runtime, runtime_ms) = match (ran, row.finished_at_us) {
        (Some(s), Some(f)) => (Runtime::Known(ms(f - s).max(0)), ms(f - s).max(0)),
        (Some(s), None) => (Runtime::AtLeast, ms(now_us - s).max(0)),
        _ => (Runtime::Unknown, 0),
    };
    let holding_at_start = before && admitted.is_some_and(|a| a <= span.from_us);
    let submit = if holding_at_start {
        w.running_at_start += 1;
        Submit::Running {
            queue: row.queue.as_deref().unwrap_or_default().into(),
            priority: row.priority,
            flavors: row
                .flavors
                .iter()
                .map(FlavorAssignment::from)
                .collect(),
            node: row.node.as_deref().unwrap_or_default().into(),
            started_at_ms: ms(admitted.unwrap_or(span.from_us)),
        }
    } else {
        if before {
            w.pending_at_start += 1;
        }
        Submit::Labels { labels: row.spec.labels.clone(), priority: row.spec.priority }
    };
    // A running job's remaining time from the start; others run their whole runtime.
    let remaining = match (&submit, ran, row.finished_at_us) {
        (Submit::Running { .. }, _, Some(f)) => ms(f - span.from_us).max(0),
        (Submit::Running { .. }, _, None) => ms(now_us - span.from_us).max(0),
        _ => runtime_ms,
    };
    let cancelled_waiting = row.state == JobState::Cancelled && ran.is_none();
    let arrival = Arrival {
        id: Name::from(row.id.as_str()),
        at_ms: ms(if holding_at_start { span.from_us } else { row.submitted_at_us }),
        submit,
        request,
        runtime_ms: remaining,
        withdraw_at_ms: row.finished_at_us.filter(|_| cancelled_waiting).map(ms),
    };
    let record = Record {
        name: row.name.clone(),
        requested_priority: row.spec.priority,
        running_at_start: holding_at_start,
        rejected: row.state == JobState::Rejected,
        wait_ms: admitted.filter(|_| row.retries == 0).map(|a| ms(a) - ms(row.submitted_at_us)),
        config_version: row.config_version,
    };
    Some((arrival, record, runtime))
}

/// Fills in the runtimes that are not on record.
fn estimate(w: &mut Workload, unknown: &[(usize, u64)], known: &mut HashMap<Labels, Vec<i64>>) {
    let mut all: Vec<i64> = known.values().flatten().copied().collect();
    let global = median(&mut all).unwrap_or(FALLBACK_RUNTIME_MS);
    let mut by_labels: HashMap<&Labels, i64> = HashMap::new();
    for (labels, runs) in known.iter_mut() {
        if let Some(m) = median(runs) {
            by_labels.insert(labels, m);
        }
    }
    for &(i, timeout_s) in unknown {
        let labels = match &w.arrivals[i].submit {
            Submit::Labels { labels, .. } => Some(labels),
            _ => None,
        };
        let mut ms = labels.and_then(|l| by_labels.get(l)).copied().unwrap_or(global);
        if timeout_s > 0 {
            ms = ms.min(i64::try_from(timeout_s).unwrap_or(i64::MAX).saturating_mul(1000));
        }
        w.arrivals[i].runtime_ms = ms;
        w.estimated_runtimes += 1;
    }
}

fn median(xs: &mut [i64]) -> Option<i64> {
    if xs.is_empty() {
        return None;
    }
    let mid = xs.len() / 2;
    Some(*xs.select_nth_unstable(mid).1)
}
