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

    /// The engine's view of this job while it holds quota (admitted or running).
    pub fn running_job(&self) -> RunningJob {
        RunningJob {
            id: self.key.clone(),
            queue: self.queue.clone(),
            priority: self.row.priority,
            request: self.request.clone(),
            flavors: self.flavors.clone(),
            node: self.node.clone().unwrap_or_else(|| "".into()),
            started_at_ms: self.row.admitted_at_us.unwrap_or(0) / 1000,
        }
    }

    /// The engine's view of this job while it waits.
    pub fn pending_job(&self) -> PendingJob {
        PendingJob {
            id: self.key.clone(),
            queue: self.queue.clone(),
            priority: self.row.priority,
            request: self.request.clone(),
            enqueued_at_ms: self.row.enqueued_at_us / 1000,
        }
    }

    /// Routes a waiting job again under a new config, by its labels and requested priority:
    /// `Ok(true)` when its queue or priority changed. A job no rule takes any more keeps its
    /// queue and priority (`Err`, with why): an apply never rejects a job already accepted.
    pub fn reroute(&mut self, compiled: &Compiled) -> Result<bool, engine::Rejection> {
        let r = engine::route(compiled, &self.row.spec.labels, self.row.spec.priority)?;
        let changed = self.queue != r.queue || self.row.priority != r.priority;
        self.row.queue = Some(r.queue.to_string());
        self.queue = r.queue;
        self.row.rule_index = r.rule_index.map(|i| i as i64);
        self.row.priority = r.priority;
        Ok(changed)
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

/// The loop's jobs are what a quick cycle reads off its lanes (see [`engine::quick::cut`]).
impl engine::quick::Waiting for Live {
    fn id(&self) -> &str {
        &self.key
    }
    fn queue(&self) -> &Name {
        &self.queue
    }
    fn request(&self) -> &Resources {
        &self.request
    }
    fn rank(&self) -> FifoRank {
        fifo_rank(self.row.priority, self.row.enqueued_at_us / 1000, &self.key)
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
