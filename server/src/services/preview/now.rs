//! The present moment under the draft: what an apply right now would do to live jobs.
//!
//! The runtime's rules on apply: a running job is never stopped by an apply; it stays
//! charged to the queue it was admitted to. Waiting jobs are routed again (one no rule takes
//! keeps its old queue). So: the running jobs are charged to the draft's quotas as they are
//! (cells already over quota are listed with what follows for them), and one admission
//! cycle under the draft over the live snapshot says whom it would admit and preempt.

use std::collections::BTreeMap;

use app::jobs::JobState;
use app::preview::{NowImpact, NowJob, NowPreemption, OverQuota};

use crate::engine::{self, Compiled, FlavorAssignment, Milli, Name, Node, PendingJob, RunningJob, Snapshot};
use crate::services::request;
use crate::store::jobs::JobRow;

/// What applying `draft` now would do, next to what `active` does at the same moment.
pub fn impact(live: &[JobRow], active: &Compiled, draft: &Compiled, nodes: &[Node], now_us: i64) -> NowImpact {
    let mut running = Vec::new();
    let mut rows_running = Vec::new();
    for row in live.iter().filter(|r| r.state.holds_quota()) {
        let Ok(request) = request::check(&row.spec) else { continue };
        running.push(RunningJob {
            id: row.id.as_str().into(),
            queue: row.queue.as_deref().unwrap_or_default().into(),
            priority: row.priority,
            request,
            flavors: row
                .flavors
                .iter()
                .map(FlavorAssignment::from)
                .collect(),
            node: row.node.as_deref().unwrap_or_default().into(),
            started_at_ms: row.admitted_at_us.unwrap_or(now_us) / 1000,
        });
        rows_running.push(row);
    }
    let waiting: Vec<&JobRow> = live.iter().filter(|r| r.state == JobState::Pending).collect();
    let pending_under = |c: &Compiled| -> Vec<PendingJob> {
        waiting
            .iter()
            .filter_map(|row| {
                let request = request::check(&row.spec).ok()?;
                let (queue, priority) = match engine::route(c, &row.spec.labels, row.spec.priority) {
                    Ok(r) => (r.queue, r.priority),
                    Err(_) => (Name::from(row.queue.as_deref().unwrap_or_default()), row.priority),
                };
                Some(PendingJob { id: row.id.as_str().into(), queue, priority, request, enqueued_at_ms: row.enqueued_at_us / 1000 })
            })
            .collect()
    };
    let now_ms = now_us / 1000;
    let plan = |c: &Compiled, pending: &[PendingJob]| {
        engine::schedule(&Snapshot { now_ms, config: c, nodes, running: &running, pending })
    };
    let (pa, pd) = (pending_under(active), pending_under(draft));
    let (plan_a, plan_d) = (plan(active, &pa), plan(draft, &pd));

    let mut out = NowImpact {
        running: running.len() as u64,
        pending: waiting.len() as u64,
        would_admit: plan_d.admissions.len() as u64,
        would_admit_active: plan_a.admissions.len() as u64,
        ..NowImpact::default()
    };
    let active_victims: Vec<&Name> = plan_a.victims().collect();
    for p in &plan_d.preemptions {
        for v in p.victims.iter().filter(|v| !active_victims.contains(&&v.job)) {
            let priority = running.iter().find(|r| r.id == v.job).map_or(0, |r| r.priority);
            out.preempted.push(NowPreemption { job_id: v.job.to_string(), queue: v.queue.to_string(), priority, preemptor: p.preemptor.to_string() });
        }
    }
    out.over_quota = over_quota(&running, active, draft);
    for (job, row) in running.iter().zip(&rows_running) {
        let what = match engine::route(draft, &row.spec.labels, row.spec.priority) {
            Err(e) => format!("the draft would reject it ({e}); it keeps running in {}", job.queue),
            Ok(r) if r.queue != job.queue => format!("the draft routes it to {}; it keeps running, charged to {}", r.queue, job.queue),
            Ok(_) if !draft.queue_ids.contains_key(&job.queue) => {
                format!("queue {} is not in the draft; it keeps running and is charged to no quota", job.queue)
            }
            Ok(_) => continue,
        };
        out.rerouted.push(NowJob { job_id: job.id.to_string(), queue: job.queue.to_string(), what });
    }
    out
}

/// Cells whose running usage exceeds the draft's nominal quota.
fn over_quota(running: &[RunningJob], active: &Compiled, draft: &Compiled) -> Vec<OverQuota> {
    let mut cells: BTreeMap<(Name, Name, Name), (Milli, Vec<&RunningJob>)> = BTreeMap::new();
    for j in running {
        for fa in &j.flavors {
            for r in &fa.resources {
                let e = cells.entry((j.queue.clone(), fa.flavor.clone(), r.clone())).or_default();
                e.0 = e.0.plus(j.request.get(r));
                e.1.push(j);
            }
        }
    }
    let mut out = Vec::new();
    for ((queue, flavor, resource), (used, jobs)) in cells {
        let Some(Some(nominal)) = draft.nominal_quota(&queue, &flavor, &resource) else { continue };
        if used <= nominal {
            continue;
        }
        let preempts = draft.queue_ids.get(&queue).is_some_and(|&q| draft.queues[q].preempt_lower_priority);
        let lowest = jobs.iter().map(|j| j.priority).min().unwrap_or(0);
        let mut consequence = format!(
            "they keep running (an apply stops nothing by itself); {queue} admits nothing more on {flavor} needing {resource} \
             until its use falls from {used} to below {nominal}"
        );
        if preempts {
            consequence.push_str(&format!(
                "; {queue} preempts lower priority, so a waiting job of priority above {lowest} can take their place"
            ));
        }
        out.push(OverQuota {
            queue: queue.to_string(),
            flavor: flavor.to_string(),
            resource: resource.to_string(),
            used: used.as_f64(),
            active_nominal: active.nominal_quota(&queue, &flavor, &resource).flatten().map(Milli::as_f64),
            draft_nominal: nominal.as_f64(),
            jobs: jobs.iter().map(|j| j.id.to_string()).collect(),
            consequence,
        });
    }
    out
}
