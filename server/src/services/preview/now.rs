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

use crate::admission::Live;
use crate::engine::{self, Compiled, InFlightLimit, Milli, Name, Node, PendingJob, RunningJob, Snapshot};
use crate::store::jobs::JobRow;

/// What applying `draft` now would do, next to what `active` does at the same moment.
pub fn impact(live: &[JobRow], active: &Compiled, draft: &Compiled, (nodes, limits): (&[Node], &[InFlightLimit]), now_us: i64) -> NowImpact {
    // The loop's own view of each job (see `admission::Live`), so both decide alike.
    let lives: Vec<Live> = live.iter().map(|row| Live::from_row(row.clone(), active)).collect();
    let holding: Vec<&Live> = lives.iter().filter(|l| l.row.state.holds_quota()).collect();
    let running: Vec<RunningJob> = holding.iter().map(|l| l.running_job()).collect();
    let waiting: Vec<&Live> = lives.iter().filter(|l| l.row.state == JobState::Pending).collect();
    // Waiting jobs are routed again by whichever config is in force, as an apply does.
    let pending_under = |c: &Compiled| -> Vec<PendingJob> {
        waiting
            .iter()
            .map(|l| {
                let mut l = (*l).clone();
                let _ = l.reroute(c);
                l.pending_job()
            })
            .collect()
    };
    let now_ms = now_us / 1000;
    let plan = |c: &Compiled, pending: &[PendingJob]| {
        engine::schedule(&Snapshot { now_ms, config: c, nodes, running: &running, pending, limits })
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
    for (job, l) in running.iter().zip(&holding) {
        let what = match engine::route(draft, &l.row.spec.labels, l.row.spec.priority) {
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
