//! Queue views: usage per quota cell, counts, and (for one queue) its waiting jobs with
//! their positions and reasons and its running jobs, read off the loop's live state. Also
//! the live jobs themselves, whole, for views that show more of each (the Anyscale API's
//! workloads and top consumers).

use std::sync::Arc;

use app::jobs::{Job, JobState, QueueView, QueuedJob, QuotaUsage, RunningEntry};

use crate::admission::{self, Live, State};
use crate::clock::now_us;
use crate::store::jobs as store;

pub(super) fn queue_views(s: &State, only: Option<&str>) -> Vec<QueueView> {
    let usage = admission::usage(s);
    let cells = s.compiled.quota_cells();
    let now = now_us();
    let mut views = Vec::new();
    for q in s.compiled.queues.iter().filter(|q| only.is_none_or(|n| *q.name == *n)) {
        let jobs: Vec<&Live> = s.jobs.values().filter(|l| l.queue == q.name).collect();
        let waiting: Vec<&&Live> = jobs.iter().filter(|l| l.row.state == JobState::Pending).collect();
        let holding: Vec<&&Live> = jobs.iter().filter(|l| l.row.state.holds_quota()).collect();
        let longest = waiting.iter().map(|l| l.row.enqueued_at_us).min().map(|t| (now - t).max(0) as f64 / 1e6);
        let mut view = QueueView {
            name: q.name.to_string(),
            preemption: if q.preempt_lower_priority { "lower_priority" } else { "never" }.into(),
            usage: cells
                .iter()
                .filter(|c| c.queue == q.name)
                .map(|c| QuotaUsage {
                    flavor: c.flavor.to_string(),
                    resource: c.resource.to_string(),
                    used: usage.get(&(c.queue.clone(), c.flavor.clone(), c.resource.clone())).copied().unwrap_or(0) as f64 / 1000.0,
                    nominal: c.nominal.map(|m| m.as_f64()),
                })
                .collect(),
            pending_count: waiting.len() as u64,
            running_count: holding.len() as u64,
            longest_wait_s: longest,
            pending: Vec::new(),
            running: Vec::new(),
        };
        if only.is_some() {
            let mut pending: Vec<QueuedJob> = waiting
                .iter()
                .map(|l| {
                    let (pos, why) = s.waiting.get(&l.key).unwrap_or((0, Arc::from("waiting for the next admission cycle")));
                    QueuedJob {
                        id: l.row.id.clone(),
                        name: l.row.name.clone(),
                        priority: l.row.priority,
                        position: pos,
                        enqueued_at: store::time_of(l.row.enqueued_at_us),
                        reason: why.to_string(),
                    }
                })
                .collect();
            // Ranked jobs first by position; held-back ones (position 0) after, by priority.
            pending.sort_by(|a, b| (a.position == 0).cmp(&(b.position == 0)).then(a.position.cmp(&b.position)).then(b.priority.cmp(&a.priority)).then(a.enqueued_at.cmp(&b.enqueued_at)));
            view.pending = pending;
            let mut running: Vec<RunningEntry> = holding
                .iter()
                .map(|l| RunningEntry {
                    id: l.row.id.clone(),
                    name: l.row.name.clone(),
                    priority: l.row.priority,
                    state: l.row.state,
                    flavors: l.row.flavors.clone(),
                    node: l.row.node.clone().unwrap_or_default(),
                    started_at: l.row.started_at_us.map(store::time_of),
                })
                .collect();
            running.sort_by(|a, b| a.started_at.cmp(&b.started_at).then(a.id.cmp(&b.id)));
            view.running = running;
        }
        views.push(view);
    }
    views
}

/// Every live job (waiting, admitted or running), of queue `only` when given, as the API
/// shows a job: waiting ones with their position and reason. Holding jobs come first, in the
/// order they started; then waiting ones in the order the queue views list them.
pub(super) fn live_jobs(s: &State, only: Option<&str>) -> Vec<Job> {
    let mut jobs: Vec<Job> = s
        .jobs
        .values()
        .filter(|l| only.is_none_or(|n| *l.queue == *n))
        .map(|l| {
            let mut job = l.row.to_job();
            if job.state == JobState::Pending {
                let (pos, why) = s.waiting.get(&l.key).unwrap_or((0, Arc::from("waiting for the next admission cycle")));
                job.position = (pos > 0).then_some(pos);
                job.reason = Some(why.to_string());
            }
            job
        })
        .collect();
    let rank = |j: &Job| match j.state {
        JobState::Pending => (1, j.position.is_none(), j.position.unwrap_or(0)),
        _ => (0, false, 0),
    };
    jobs.sort_by(|a, b| {
        let since = |j: &Job| j.started_at.or(j.admitted_at);
        rank(a)
            .cmp(&rank(b))
            .then_with(|| match a.state {
                // Ranked waiting jobs by position; held-back ones by priority, then age.
                JobState::Pending => b.priority.cmp(&a.priority).then(a.enqueued_at.cmp(&b.enqueued_at)),
                _ => since(a).cmp(&since(b)),
            })
            .then_with(|| a.id.cmp(&b.id))
    });
    jobs
}
