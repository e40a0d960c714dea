//! The live jobs: what the loop holds of each unfinished job, and what is read off them
//! (usage per quota cell, free capacity per node, a pending job as the engine sees it).

use super::*;

/// A job the loop holds in memory: its row plus the engine's view of it.
#[derive(Debug, Clone)]
pub struct Live {
    pub row: JobRow,
    pub key: Name,
    pub queue: Name,
    pub request: Resources,
    pub flavors: Vec<FlavorAssignment>,
    pub node: Option<Name>,
}

impl Live {
    /// A live job from its stored row; `request` is recomputed from the spec, and the queue's
    /// name is the config's copy when it has that queue.
    pub fn from_row(row: JobRow, compiled: &Compiled) -> Live {
        let request = crate::services::request::check(&row.spec).unwrap_or_default();
        let flavors = row
            .flavors
            .iter()
            .map(FlavorAssignment::from)
            .collect();
        Live {
            key: row.id.as_str().into(),
            queue: {
                let q = row.queue.as_deref().unwrap_or("");
                compiled.queue_name(q).cloned().unwrap_or_else(|| q.into())
            },
            node: row.node.as_deref().map(Into::into),
            request,
            flavors,
            row,
        }
    }

    pub(super) fn run(&self) -> RunId {
        RunId { job: self.key.clone(), run: self.row.runs }
    }

    pub(super) fn clear_placement(&mut self) {
        self.flavors.clear();
        self.node = None;
        self.row.flavors.clear();
        self.row.node = None;
        self.row.backend = None;
        self.row.handle = None;
    }
}

/// When a running job passes its timeout (µs), if it has one.
pub(super) fn deadline_of(row: &JobRow) -> Option<i64> {
    let started = row.started_at_us?;
    (row.spec.timeout_s > 0).then(|| started.saturating_add((row.spec.timeout_s as i64).saturating_mul(1_000_000)))
}

/// Used amount per (queue, flavor, resource), in milli-units, over holding jobs.
///
/// Called after every change, so it adds up by the names' addresses first: holding jobs
/// share the config's allocations of them, so the map of names is built from the few
/// distinct cells rather than from every job (equal names at different addresses are
/// merged there).
pub fn usage(state: &State) -> BTreeMap<(Name, Name, Name), i64> {
    let mut cells = HashMap::new();
    for l in state.jobs.values().filter(|l| l.row.state.holds_quota()) {
        for f in &l.flavors {
            for r in &f.resources {
                let key = [l.queue.as_ptr() as usize, f.flavor.as_ptr() as usize, r.as_ptr() as usize];
                let cell = cells.entry(key).or_insert(((&l.queue, &f.flavor, r), 0i64));
                cell.1 = cell.1.saturating_add(l.request.get(r).0);
            }
        }
    }
    let mut out = BTreeMap::new();
    for ((q, f, r), amount) in cells.into_values() {
        let cell = out.entry((q.clone(), f.clone(), r.clone())).or_insert(0i64);
        *cell = cell.saturating_add(amount);
    }
    out
}

/// Free capacity of a node after what work outside Berth and Berth's holding jobs placed on
/// it take, per resource of its capacity (a resource with nothing free is there, at 0).
pub fn free_on(state: &State, node: &Node) -> BTreeMap<Name, Milli> {
    let mut free: BTreeMap<Name, Milli> = node.capacity.iter().map(|(n, a)| (n.clone(), a)).collect();
    for (n, a) in node.used_outside.iter() {
        if let Some(e) = free.get_mut(n) {
            *e = e.minus(a).max(Milli::ZERO);
        }
    }
    for l in state.jobs.values().filter(|l| l.row.state.holds_quota() && l.node.as_deref() == Some(&*node.id)) {
        for (n, a) in l.request.iter() {
            let e = free.entry(n.clone()).or_insert(Milli::ZERO);
            *e = e.minus(a);
        }
    }
    free
}

/// What the engine is offered for a pending job.
pub(super) fn pending_job(l: &Live) -> PendingJob {
    PendingJob { id: l.key.clone(), queue: l.queue.clone(), priority: l.row.priority, request: l.request.clone(), enqueued_at_ms: l.row.enqueued_at_us / 1000 }
}

pub(super) fn job_event(now: i64, kind: &'static str, live: &Live, message: String) -> NewEvent {
    NewEvent {
        at_us: now,
        kind,
        job_id: Some(live.row.id.clone()),
        queue: live.row.queue.clone(),
        flavor: (!live.flavors.is_empty()).then(|| live.flavors.iter().map(|f| &*f.flavor).collect::<Vec<_>>().join(",")),
        node: live.row.node.clone(),
        config_version: live.row.config_version,
        rule_index: live.row.rule_index,
        message,
        detail: None,
    }
}
