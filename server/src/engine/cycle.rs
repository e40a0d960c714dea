//! The admission cycle: snapshot → order → assign flavors → pick victims → plan.
//!
//! [`schedule`] reads top to bottom as those steps; [`Cycle::decide`] is one job's turn.

use std::sync::Arc;

use super::assign::{self, Fit, Scratch};
use super::explain;
use super::order::Order;
use super::plan::{Admission, PendingInfo, Plan, Preemption};
use super::policy::QueueingStrategy;
use super::preempt::{self, FailCache, NoVictims};
use super::resources::Milli;
use super::snapshot::{FlavorAssignment, Snapshot};
use super::state::State;

/// Decides one admission cycle. Pure: same snapshot, same plan.
pub fn schedule(snap: &Snapshot) -> Plan {
    // 1. Snapshot: dense tables, running jobs charged to quotas and nodes.
    let mut st = State::build(*snap);
    // 2. Order: each queue's total order, heads interleaved across queues.
    let mut order = Order::build(&st);
    // 3–4. Each job in turn: assign flavors, else pick victims, else explain why it waits.
    let mut cycle = Cycle::new(&st);
    while let Some((q, j)) = order.next_job(&st) {
        cycle.decide(&mut st, q, j);
    }
    // 5. Plan: admissions and preemptions in decision order, waiting jobs with positions.
    cycle.into_plan(&st, &order)
}

/// The last reason a queue gave, reused for the next job asking exactly the same while
/// nothing the reason depends on changed (the queue's usage, releases, priority).
struct LastMiss {
    epoch: u64,
    q_epoch: u64,
    prio: i64,
    row: Vec<Milli>,
    reason: Arc<str>,
}

/// Decisions accumulated during a cycle.
struct Cycle {
    sc: Scratch,
    row: Vec<Milli>,
    plan: Plan,
    /// (queue, position, pending job, reason, no room); queue `q` of the config, or
    /// `queues.len() + k` for the k-th queue the config lacks (see [`Cycle::into_plan`]).
    waiting: Vec<(usize, usize, usize, Arc<str>, bool)>,
    positions: Vec<usize>,
    /// Per strict_fifo queue whose head did not fit: the reason for everything behind it.
    blocked: Vec<Option<Arc<str>>>,
    /// Per queue: bumped on each admission (usage changed, so reasons change).
    q_epoch: Vec<u64>,
    last: Vec<Option<LastMiss>>,
    preempt_fails: Vec<FailCache>,
}

impl Cycle {
    fn new(st: &State) -> Cycle {
        let n = st.c.queues.len();
        Cycle {
            sc: Scratch::default(),
            row: Vec::with_capacity(st.r),
            plan: Plan { now_ms: st.snap.now_ms, ..Plan::default() },
            waiting: Vec::new(),
            positions: vec![0; n],
            blocked: vec![None; n],
            q_epoch: vec![0; n],
            last: (0..n).map(|_| None).collect(),
            preempt_fails: (0..n).map(|_| FailCache::default()).collect(),
        }
    }

    /// One job's turn.
    fn decide(&mut self, st: &mut State, q: usize, j: usize) {
        let def = &st.c.queues[q];
        let prio = st.snap.pending[j].priority;
        if let Some(reason) = &self.blocked[q] {
            let reason = reason.clone();
            return self.wait(q, j, reason, true);
        }
        if let Some(bad) = st.pending_bad[j] {
            return self.wait(q, j, format!("queue {}: {bad}", def.name).into(), false);
        }
        self.row.clear();
        self.row.extend_from_slice(st.row(j));
        let row = std::mem::take(&mut self.row);
        if let Some(last) = &self.last[q] {
            if last.epoch == st.epoch && last.q_epoch == self.q_epoch[q] && last.prio == prio && last.row == row {
                // Nothing it depends on changed: same verdict, no work.
                let reason = last.reason.clone();
                self.after_no_fit(st, q, j);
                self.row = row;
                return self.wait(q, j, reason, true);
            }
        }
        match assign::fit(st, q, &row, &mut self.sc) {
            Fit::Fits { node } => self.admit(st, q, j, &row, node),
            Fit::Uncovered { res } => self.wait(q, j, explain::uncovered(st, q, res).into(), false),
            Fit::Nowhere => {
                let mut why = None;
                if def.preempt_lower_priority {
                    match self.preempt(st, q, j, &row) {
                        Ok(()) => {
                            self.row = row;
                            return;
                        }
                        Err(e) => why = Some(e),
                    }
                }
                let reason: Arc<str> = explain::no_fit(st, q, &row, &self.sc.misses, why, prio).into();
                let last = self.last[q].get_or_insert_with(|| LastMiss {
                    epoch: 0,
                    q_epoch: 0,
                    prio,
                    row: Vec::with_capacity(row.len()),
                    reason: reason.clone(),
                });
                (last.epoch, last.q_epoch, last.prio, last.reason) = (st.epoch, self.q_epoch[q], prio, reason.clone());
                last.row.clear();
                last.row.extend_from_slice(&row);
                self.after_no_fit(st, q, j);
                self.wait(q, j, reason, true);
            }
        }
        self.row = row;
    }

    /// A strict_fifo queue stops at the first job that does not fit.
    fn after_no_fit(&mut self, st: &State, q: usize, j: usize) {
        let def = &st.c.queues[q];
        if def.strategy == QueueingStrategy::StrictFifo {
            self.blocked[q] = Some(explain::blocked(&def.name, &st.snap.pending[j].id).into());
        }
    }

    /// Step 4: victims simulated, then released for real and the job placed.
    fn preempt(&mut self, st: &mut State, q: usize, j: usize, row: &[Milli]) -> Result<(), NoVictims> {
        let prio = st.snap.pending[j].priority;
        let set = preempt::find(st, q, prio, row, &mut self.sc, &mut self.preempt_fails[q])?;
        let victims = std::mem::take(&mut self.sc.victims);
        for &v in &victims {
            st.release(v);
        }
        let score = st.c.queues[q].placement.score;
        let Ok(node) = st.place(set, row, score) else {
            // The simulation is exact, so this does not happen; never stop jobs for nothing.
            for &v in &victims {
                st.restore(v);
            }
            self.sc.victims = victims;
            return Err(NoVictims::NotEnough);
        };
        let running = st.snap.running;
        self.plan.preemptions.push(Preemption {
            preemptor: st.snap.pending[j].id.clone(),
            queue: st.c.queues[q].name.clone(),
            victims: victims.iter().map(|&v| running[v].id.clone()).collect(),
        });
        self.sc.victims = victims;
        self.admit(st, q, j, row, node);
        Ok(())
    }

    /// Charges the admission to the working copy and records it.
    fn admit(&mut self, st: &mut State, q: usize, j: usize, row: &[Milli], node: usize) {
        let def = &st.c.queues[q];
        let choice = std::mem::take(&mut self.sc.choice);
        let flavors = choice
            .iter()
            .map(|&(g, slot)| {
                let extras = (def.resources_len()..st.r).filter(|_| def.covers_everything);
                let resources = def.groups[g]
                    .resources
                    .iter()
                    .copied()
                    .chain(extras)
                    .filter(|&k| row.get(k).is_some_and(|a| *a != Milli::ZERO))
                    .map(|k| st.names[k].clone())
                    .collect();
                FlavorAssignment { flavor: st.c.flavors[def.slots[slot].flavor].name.clone(), resources }
            })
            .collect();
        st.charge(q, &choice, row, node);
        self.q_epoch[q] += 1;
        let n = &st.snap.nodes[st.nodes[node]];
        self.plan.admissions.push(Admission {
            job: st.snap.pending[j].id.clone(),
            queue: def.name.clone(),
            flavors,
            node: n.id.clone(),
            backend: n.backend.clone(),
        });
        self.sc.choice = choice;
    }

    fn wait(&mut self, q: usize, j: usize, reason: Arc<str>, no_room: bool) {
        self.positions[q] += 1;
        self.waiting.push((q, self.positions[q], j, reason, no_room));
    }

    /// Step 5: the plan, waiting jobs sorted by queue name then position.
    fn into_plan(mut self, st: &State, order: &Order) -> Plan {
        let pending = st.snap.pending;
        let defined = st.c.queues.len();
        for (k, (queue, jobs)) in order.orphans.iter().enumerate() {
            let reason: Arc<str> = format!("queue {queue} is not defined in the active config").into();
            for (i, &j) in jobs.iter().enumerate() {
                self.waiting.push((defined + k, i + 1, j, reason.clone(), false));
            }
        }
        // Queues ranked by name once, so the sort compares numbers rather than names.
        let names: Vec<&str> = st.c.queues.iter().map(|q| &*q.name).chain(order.orphans.keys().copied()).collect();
        let mut by_name: Vec<usize> = (0..names.len()).collect();
        by_name.sort_unstable_by_key(|&i| names[i]);
        let mut rank = vec![0; names.len()];
        for (r, &i) in by_name.iter().enumerate() {
            rank[i] = r;
        }
        self.waiting.sort_unstable_by_key(|w| (rank[w.0], w.1));
        self.plan.pending = self
            .waiting
            .into_iter()
            .map(|(q, position, j, reason, no_room)| {
                let queue = if q < defined { st.c.queues[q].name.clone() } else { pending[j].queue.clone() };
                PendingInfo { job: pending[j].id.clone(), queue, position, reason, no_room }
            })
            .collect();
        self.plan
    }
}

impl super::compile::QueueDef {
    /// Number of resources interned by the config (beyond are names only jobs mention).
    fn resources_len(&self) -> usize {
        self.covered.len()
    }
}
