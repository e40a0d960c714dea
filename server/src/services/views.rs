//! Queue and cohort views: usage per quota cell (borrowed and lent in a cohort), counts,
//! and (for one queue) its waiting jobs with their positions and reasons and its running
//! jobs, read off the loop's live state. Also the live jobs themselves, whole, for views
//! that show more of each (the Anyscale API's workloads and top consumers).


use app::jobs::{CohortMember, CohortPool, CohortView, Job, JobState, QueueView, QueuedJob, QuotaUsage, RunningEntry};

use crate::admission::{self, Live, State, Wait};
use crate::clock::now_us;
use crate::engine::{self, CellShare, Milli, QuotaCell};
use crate::store::jobs as store;

/// Every quota cell with its usage and what it borrows and lends, in config order.
pub(crate) fn cell_uses(s: &State) -> Vec<(QuotaCell, Milli, CellShare)> {
    let usage = admission::usage(s);
    let cells = s.compiled.quota_cells();
    let used: Vec<Milli> =
        cells.iter().map(|c| Milli(usage.get(&(c.queue.clone(), c.flavor.clone(), c.resource.clone())).copied().unwrap_or(0))).collect();
    let shares = engine::cohort_shares(&cells, &used);
    cells.into_iter().zip(used).zip(shares).map(|((c, u), sh)| (c, u, sh)).collect()
}

fn quota_usage((c, used, share): &(QuotaCell, Milli, CellShare)) -> QuotaUsage {
    let cohort = c.cohort.is_some();
    QuotaUsage {
        flavor: c.flavor.to_string(),
        resource: c.resource.to_string(),
        used: used.as_f64(),
        nominal: c.nominal.map(|m| m.as_f64()),
        borrowed: share.borrowed.as_f64(),
        lent: share.lent.as_f64(),
        lendable: c.lendable.filter(|_| cohort).map(|m| m.as_f64()),
        borrowing_limit: c.borrowing_limit.filter(|_| cohort).map(|m| m.as_f64()),
    }
}

/// Every cohort of the active config (or the one named), with each member's cells and share.
pub(super) fn cohort_views(s: &State, only: Option<&str>) -> Vec<CohortView> {
    let cells = cell_uses(s);
    let (quota_cells, shares): (Vec<QuotaCell>, Vec<CellShare>) = cells.iter().map(|(c, _, sh)| (c.clone(), *sh)).unzip();
    let mut views = Vec::new();
    for (name, members, fair) in s.compiled.cohorts().filter(|(n, _, _)| only.is_none_or(|o| &***n == o)) {
        let members = members
            .into_iter()
            .map(|q| {
                let weight = s.compiled.weight(q).unwrap_or(Milli::units(1));
                let share = match engine::dominant_share(&quota_cells, &shares, q, weight) {
                    None => Some(0.0),
                    Some(i64::MAX) => None,
                    Some(per_mille) => Some(per_mille as f64 / 10.0),
                };
                let jobs = s.jobs.values().filter(|l| l.queue == *q);
                let (pending, running) = jobs.fold((0, 0), |(p, r), l| {
                    (p + u64::from(l.row.state == JobState::Pending), r + u64::from(l.row.state.holds_quota()))
                });
                CohortMember {
                    queue: q.to_string(),
                    usage: cells.iter().filter(|(c, _, _)| c.queue == *q).map(quota_usage).collect(),
                    pending_count: pending,
                    running_count: running,
                    weight: weight.as_f64(),
                    share,
                }
            })
            .collect();
        let mut pools: Vec<CohortPool> = Vec::new();
        for (c, used, share) in cells.iter().filter(|(c, _, _)| c.cohort.as_ref() == Some(name)) {
            let at = match pools.iter().position(|p| p.flavor == *c.flavor && p.resource == *c.resource) {
                Some(at) => at,
                None => {
                    pools.push(CohortPool {
                        flavor: c.flavor.to_string(),
                        resource: c.resource.to_string(),
                        lendable: Some(0.0),
                        nominal: Some(0.0),
                        used: 0.0,
                        borrowed: 0.0,
                        idle: Some(0.0),
                    });
                    pools.len() - 1
                }
            };
            let p = &mut pools[at];
            let add = |sum: Option<f64>, x: Option<Milli>| Some(sum? + x?.as_f64());
            p.lendable = add(p.lendable, c.lendable);
            p.nominal = add(p.nominal, c.nominal);
            p.used += used.as_f64();
            p.borrowed += share.borrowed.as_f64();
            // What this member keeps in the pool: use above its guaranteed part.
            let in_pool = match (c.nominal, c.lendable) {
                (Some(n), Some(l)) => Some(used.minus(n.minus(l)).max(Milli::ZERO).as_f64()),
                _ => None,
            };
            p.idle = p.idle.zip(in_pool).map(|(idle, u)| idle - u);
        }
        for p in &mut pools {
            p.idle = p.idle.zip(p.lendable).map(|(minus_used, lendable)| (lendable + minus_used).max(0.0));
        }
        views.push(CohortView { name: name.to_string(), fair_sharing: fair, members, pools });
    }
    views
}

pub(super) fn queue_views(s: &State, only: Option<&str>) -> Vec<QueueView> {
    let cells = cell_uses(s);
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
            cohort: s.compiled.cohort_of(&q.name).map(|c| c.to_string()),
            usage: cells.iter().filter(|(c, _, _)| c.queue == q.name).map(quota_usage).collect(),
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
                    let wait = s.waiting.get(&l.key).unwrap_or_else(Wait::unexplained);
                    QueuedJob {
                        id: l.row.id.clone(),
                        name: l.row.name.clone(),
                        priority: l.row.priority,
                        position: wait.position,
                        enqueued_at: store::time_of(l.row.enqueued_at_us),
                        reason: wait.reason.to_string(),
                        reason_headline: wait.headline.map(|h| h.to_string()),
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
                s.waiting.get(&l.key).unwrap_or_else(Wait::unexplained).tell(&mut job);
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

/// Sets the scrape-time gauges of `m` from the live state: per queue the jobs waiting,
/// admitted and running; per quota cell the nominal quota, usage and borrowed amount; per
/// backend the jobs it holds. Series of queues or cells no longer in the config disappear.
pub(super) fn observe_gauges(s: &State, m: &crate::metrics::Metrics) {
    for g in [&m.pending, &m.admitted, &m.running] {
        g.reset();
    }
    for q in &s.compiled.queues {
        for g in [&m.pending, &m.admitted, &m.running] {
            g.with_label_values(&[&*q.name]).set(0);
        }
    }
    m.in_flight.reset();
    let mut backends: Vec<&str> = s.nodes.iter().map(|n| &*n.backend).collect();
    backends.sort_unstable();
    backends.dedup();
    for b in backends {
        m.in_flight.with_label_values(&[b]).set(0);
    }
    for l in s.jobs.values() {
        let gauge = match l.row.state {
            JobState::Pending => &m.pending,
            JobState::Admitted => &m.admitted,
            JobState::Running => &m.running,
            _ => continue,
        };
        gauge.with_label_values(&[&*l.queue]).inc();
        if let (true, Some(b)) = (l.row.state.holds_quota(), l.row.backend.as_deref()) {
            m.in_flight.with_label_values(&[b]).inc();
        }
    }
    for g in [&m.nominal, &m.usage, &m.borrowed] {
        g.reset();
    }
    for (c, used, share) in cell_uses(s) {
        let cell = [&*c.queue, &*c.flavor, &*c.resource];
        if let Some(n) = c.nominal {
            m.nominal.with_label_values(&cell).set(n.as_f64());
        }
        m.usage.with_label_values(&cell).set(used.as_f64());
        m.borrowed.with_label_values(&cell).set(share.borrowed.as_f64());
    }
    m.config_version.set(s.config_version as f64);
}
