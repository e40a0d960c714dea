//! Which pending jobs a simulated cycle offers the engine: not the ones quota alone already
//! refuses, so a backlog of thousands is not re-decided on every event.
//!
//! A job is *parked* when its queue is `fifo` + `best_effort_fifo` and never preempts, and no
//! flavor of one of its groups has quota room for it. Such a job is not admitted by the
//! cycle whether it is offered or not (its quota only frees when a job of its own queue
//! ends, which no decision of this cycle does), and in a fifo queue leaving it out changes no
//! other decision: the merged order of the others is the same global sort (priority,
//! enqueue time, id). Parked jobs are grouped by request shape, in the engine's order; when
//! the queue releases quota, each shape gives back as many of its first jobs as the room
//! could hold. Queues that preempt, and queues of a cohort (whose room depends on their
//! peers), are always offered whole: a preemption frees quota in the middle of a cycle,
//! which a gate deciding before the cycle cannot know.
//! `tests/sim.rs` checks on random workloads that the gate changes no admission.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};

use super::super::compile::{Compiled, QueueDef};
use super::super::policy::QueueingStrategy;
use super::super::resources::{Milli, Name, Resources};
use super::super::snapshot::{PendingJob, RunningJob};

type Key = (Reverse<i64>, i64, Name);

/// Per queue: usage by slot × resource, parked jobs, and what to give back next cycle.
pub(super) struct Gate {
    r: usize,
    parkable: Vec<bool>,
    usage: Vec<Vec<Milli>>,
    parked: Vec<HashMap<Resources, BTreeMap<Key, PendingJob>>>,
    /// Quota was released: parked jobs that now fit go back.
    released: Vec<bool>,
}

fn key(p: &PendingJob) -> Key {
    (Reverse(p.priority), p.enqueued_at_ms, p.id.clone())
}

impl Gate {
    pub fn new(c: &Compiled) -> Gate {
        let r = c.resources.len();
        let n = c.queues.len();
        Gate {
            r,
            parkable: c
                .queues
                .iter()
                .map(|q| {
                    q.ordering.name == "fifo"
                        && q.strategy == QueueingStrategy::BestEffortFifo
                        && !q.covers_everything
                        && !q.preempt_lower_priority
                        && q.cohort.is_none()
                })
                .collect(),
            usage: c.queues.iter().map(|q| vec![Milli::ZERO; q.slots.len() * r]).collect(),
            parked: (0..n).map(|_| HashMap::new()).collect(),
            released: vec![false; n],
        }
    }

    /// Mirrors the engine's charge of a running job to its queue's quota cells.
    pub fn charge(&mut self, c: &Compiled, job: &RunningJob, add: bool) {
        let Some(&q) = c.queue_ids.get(&*job.queue) else { return };
        let def = &c.queues[q];
        for fa in &job.flavors {
            let Some(slot) = def.slots.iter().position(|s| c.flavors[s.flavor].name == fa.flavor) else { continue };
            for name in &fa.resources {
                if let Some(k) = c.resources.iter().position(|x| x == name) {
                    let cell = &mut self.usage[q][slot * self.r + k];
                    *cell = if add { cell.plus(job.request.get(name)) } else { cell.minus(job.request.get(name)) };
                }
            }
        }
        if !add {
            self.released[q] = true;
        }
    }

    /// How many copies of `req` the queue's quota has room for (0: none; an overestimate is
    /// fine, an underestimate never happens).
    fn room(&self, c: &Compiled, q: usize, req: &Resources) -> u64 {
        let def: &QueueDef = &c.queues[q];
        let mut groups: Vec<(usize, Vec<(usize, Milli)>)> = Vec::new();
        for (name, amount) in req.iter() {
            let Some(k) = c.resources.iter().position(|x| x == name) else { return u64::MAX };
            let Some(g) = def.covered[k] else { return u64::MAX };
            match groups.iter_mut().find(|(gg, _)| *gg == g) {
                Some((_, rs)) => rs.push((k, amount)),
                None => groups.push((g, vec![(k, amount)])),
            }
        }
        let mut fits = u64::MAX;
        for (g, rs) in &groups {
            let mut copies = 0u64;
            for slot in def.groups[*g].slots.clone() {
                let quota = &def.slots[slot].quota;
                let n = rs
                    .iter()
                    .map(|&(k, a)| {
                        if quota[k] == Milli::UNLIMITED {
                            return u64::MAX;
                        }
                        let free = quota[k].0.saturating_sub(self.usage[q][slot * self.r + k].0);
                        if free < a.0 { 0 } else { (free / a.0.max(1)) as u64 }
                    })
                    .min()
                    .unwrap_or(u64::MAX);
                copies = copies.saturating_add(n);
            }
            fits = fits.min(copies);
        }
        fits
    }

    /// Gives back the parked jobs that might be admitted now.
    pub fn unpark(&mut self, c: &Compiled, pending: &mut Vec<PendingJob>) {
        for q in 0..self.parked.len() {
            if !std::mem::take(&mut self.released[q]) || self.parked[q].is_empty() {
                continue;
            }
            let mut shapes = std::mem::take(&mut self.parked[q]);
            for (shape, jobs) in shapes.iter_mut() {
                for _ in 0..self.room(c, q, shape).min(jobs.len() as u64) {
                    if let Some(entry) = jobs.first_entry() {
                        pending.push(entry.remove());
                    }
                }
            }
            shapes.retain(|_, jobs| !jobs.is_empty());
            self.parked[q] = shapes;
        }
    }

    /// Parks the jobs of `pending` quota alone refuses.
    pub fn park(&mut self, c: &Compiled, pending: &mut Vec<PendingJob>) {
        let mut kept = Vec::with_capacity(pending.len());
        let mut rooms: HashMap<(usize, &Resources), u64> = HashMap::new();
        let drained: Vec<PendingJob> = std::mem::take(pending);
        let mut to_park: Vec<(usize, PendingJob)> = Vec::new();
        for p in &drained {
            let Some(&q) = c.queue_ids.get(&*p.queue) else { continue };
            if !self.parkable[q] {
                continue;
            }
            let room = *rooms.entry((q, &p.request)).or_insert_with(|| self.room(c, q, &p.request));
            if room == 0 {
                to_park.push((q, p.clone()));
            }
        }
        if to_park.is_empty() {
            *pending = drained;
            return;
        }
        let parked_ids: std::collections::HashSet<Name> = to_park.iter().map(|(_, p)| p.id.clone()).collect();
        for p in drained {
            if !parked_ids.contains(&p.id) {
                kept.push(p);
            }
        }
        for (q, p) in to_park {
            self.parked[q].entry(p.request.clone()).or_default().insert(key(&p), p);
        }
        *pending = kept;
    }

    /// Takes job `id` out of the parked ones (withdrawn while it waited); true if it was here.
    pub fn remove(&mut self, c: &Compiled, queue: &str, id: &Name) -> bool {
        let Some(&q) = c.queue_ids.get(queue) else { return false };
        for jobs in self.parked[q].values_mut() {
            if let Some(k) = jobs.iter().find(|(_, p)| p.id == *id).map(|(k, _)| k.clone()) {
                jobs.remove(&k);
                return true;
            }
        }
        false
    }
}
