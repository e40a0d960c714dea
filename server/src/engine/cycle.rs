//! The admission cycle: snapshot → order → assign flavors → pick victims → plan.
//!
//! [`schedule`] reads top to bottom as those steps; [`Cycle::decide`] is one job's turn.
//! Flavors are assigned in two passes (see `order.rs`): within nominal quota first, then
//! borrowing from cohorts.


use super::assign::{self, Fit, Scratch};
use super::explain::{self, Why};
use super::order::Order;
use super::compile::Reclaim;
use super::plan::{Admission, Borrowed, PendingInfo, Plan, Preemption, Victim};
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
    // 3–4. Each job in turn: assign flavors, else pick victims, else explain why it waits;
    // a job of a cohort that would have to borrow or preempt waits for the second pass.
    let mut cycle = Cycle::new(&st);
    while let Some((q, j)) = order.next_job(&st) {
        cycle.decide(&mut st, &mut order, q, j);
    }
    // 3b. Borrowing: the deferred jobs, after every job that fits within nominal quota.
    order.start_borrowing(&st);
    while let Some((q, j)) = order.next_job(&st) {
        cycle.decide(&mut st, &mut order, q, j);
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
    why: Why,
}

/// Decisions accumulated during a cycle.
struct Cycle {
    sc: Scratch,
    row: Vec<Milli>,
    plan: Plan,
    /// (queue, position, pending job, reason, no room); queue `q` of the config, or
    /// `queues.len() + k` for the k-th queue the config lacks (see [`Cycle::into_plan`]).
    /// Waiting jobs: queue, position, job, why, whether no room was found, and how many
    /// preemptions the cycle had made by then.
    waiting: Vec<(usize, usize, usize, Why, bool, usize)>,
    positions: Vec<usize>,
    /// Per strict_fifo queue whose head did not fit: the reason for everything behind it.
    blocked: Vec<Option<Why>>,
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

    /// One job's turn; in the first pass, a cohort queue's job that does not fit within
    /// nominal is deferred with the rest of its queue.
    fn decide(&mut self, st: &mut State, order: &mut Order, q: usize, j: usize) {
        let def = &st.c.queues[q];
        let prio = st.snap.pending[j].priority;
        if let Some(why) = &self.blocked[q] {
            let why = why.clone();
            return self.wait(q, j, why, true);
        }
        if let Some(bad) = st.pending_bad[j] {
            return self.wait(q, j, Why::new(format!("queue {}: {bad}", def.name), format!("Cannot run: {bad}")), false);
        }
        self.row.clear();
        self.row.extend_from_slice(st.row(j));
        let row = std::mem::take(&mut self.row);
        if def.cohort.is_some() && !order.borrowing() {
            match assign::fit(st, q, &row, &mut self.sc, false) {
                Fit::Fits { node } => self.admit(st, q, j, &row, node),
                Fit::Uncovered { res } => self.wait(q, j, uncovered(st, q, res), false),
                Fit::Nowhere => order.defer(q),
            }
            self.row = row;
            return;
        }
        if let Some(last) = &self.last[q] {
            if last.epoch == st.epoch && last.q_epoch == self.q_epoch[q] && last.prio == prio && last.row == row {
                // Nothing it depends on changed: same verdict, no work.
                let why = last.why.clone();
                self.after_no_fit(st, q, j);
                self.row = row;
                return self.wait(q, j, why, true);
            }
        }
        match assign::fit(st, q, &row, &mut self.sc, true) {
            Fit::Fits { node } => self.admit(st, q, j, &row, node),
            Fit::Uncovered { res } => self.wait(q, j, uncovered(st, q, res), false),
            Fit::Nowhere => {
                let mut why = None;
                if def.preempt_lower_priority || def.reclaim != Reclaim::Never {
                    match self.preempt(st, q, j, &row) {
                        Ok(()) => {
                            self.row = row;
                            return;
                        }
                        Err(e) => why = Some(e),
                    }
                }
                let said = Why::new(
                    explain::no_fit(st, q, &row, &self.sc.misses, why, prio),
                    explain::headline(st, q, &row, &self.sc.misses, why),
                );
                let last = self.last[q].get_or_insert_with(|| LastMiss {
                    epoch: 0,
                    q_epoch: 0,
                    prio,
                    row: Vec::with_capacity(row.len()),
                    why: said.clone(),
                });
                (last.epoch, last.q_epoch, last.prio, last.why) = (st.epoch, self.q_epoch[q], prio, said.clone());
                last.row.clear();
                last.row.extend_from_slice(&row);
                self.after_no_fit(st, q, j);
                self.wait(q, j, said, true);
            }
        }
        self.row = row;
    }

    /// A strict_fifo queue stops at the first job that does not fit.
    fn after_no_fit(&mut self, st: &State, q: usize, j: usize) {
        let def = &st.c.queues[q];
        if def.strategy == QueueingStrategy::StrictFifo {
            let head = &st.snap.pending[j].id;
            self.blocked[q] = Some(Why::new(explain::blocked(&def.name, head), explain::blocked_headline(head)));
        }
    }

    /// Step 4: victims simulated, then released for real and the job placed.
    fn preempt(&mut self, st: &mut State, q: usize, j: usize, row: &[Milli]) -> Result<(), NoVictims> {
        let prio = st.snap.pending[j].priority;
        let set = preempt::find(st, q, prio, row, &mut self.sc, &mut self.preempt_fails[q])?;
        let victims = std::mem::take(&mut self.sc.victims);
        for &(v, _) in &victims {
            st.release(v);
        }
        let score = st.c.queues[q].placement.score;
        let Ok(node) = st.place(set, row, score) else {
            // The simulation is exact, so this does not happen; never stop jobs for nothing.
            for &(v, _) in &victims {
                st.restore(v);
            }
            self.sc.victims = victims;
            return Err(NoVictims::NotEnough);
        };
        let running = st.snap.running;
        self.plan.preemptions.push(Preemption {
            preemptor: st.snap.pending[j].id.clone(),
            queue: st.c.queues[q].name.clone(),
            victims: victims
                .iter()
                .map(|&(v, cause)| {
                    let queue = st.c.queue_name(&running[v].queue).cloned().unwrap_or_else(|| running[v].queue.clone());
                    Victim { job: running[v].id.clone(), queue, cause }
                })
                .collect(),
        });
        // Reasons of the victims' queues change too.
        for &(v, _) in &victims {
            if let Some(&m) = st.c.queue_ids.get(&*running[v].queue) {
                self.bump(st, m);
            }
        }
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
        let borrowed = self.charge(st, q, &choice, row, node);
        self.bump(st, q);
        let n = &st.snap.nodes[st.nodes[node]];
        self.plan.admissions.push(Admission {
            job: st.snap.pending[j].id.clone(),
            queue: def.name.clone(),
            flavors,
            node: n.id.clone(),
            backend: n.backend.clone(),
            borrowed,
        });
        self.sc.choice = choice;
    }

    /// Charges an admission to the working copy; what it borrows from the queue's cohort,
    /// and from whom.
    fn charge(&mut self, st: &mut State, q: usize, choice: &[(usize, usize)], row: &[Milli], node: usize) -> Vec<Borrowed> {
        let def = &st.c.queues[q];
        let Some(cohort) = def.cohort else {
            st.charge(q, choice, row, node);
            return Vec::new();
        };
        let cells: Vec<(usize, usize, Milli)> = choice
            .iter()
            .flat_map(|&(g, slot)| def.groups[g].resources.iter().map(move |&k| (slot, k)))
            .filter(|&(_, k)| row[k] != Milli::ZERO)
            .map(|(slot, k)| {
                let cell = st.cell(q, slot, k);
                let amount = st.terms(cell).borrowed(st.usage[cell].plus(row[k])).minus(st.terms(cell).borrowed(st.usage[cell]));
                (slot, k, amount)
            })
            .filter(|c| c.2 > Milli::ZERO)
            .collect();
        // Lenders before the charge: what each peer has idle to lend.
        let borrowed = cells
            .into_iter()
            .map(|(slot, k, amount)| Borrowed {
                cohort: st.c.cohorts[cohort].name.clone(),
                flavor: st.c.flavors[def.slots[slot].flavor].name.clone(),
                resource: st.names[k].clone(),
                amount,
                lenders: st.lenders(q, st.cell(q, slot, k), amount),
            })
            .collect();
        st.charge(q, choice, row, node);
        borrowed
    }

    /// Usage of queue `q` changed: its reasons, and in a cohort its peers', are stale.
    fn bump(&mut self, st: &State, q: usize) {
        match st.c.queues[q].cohort {
            Some(c) => st.c.cohorts[c].members.iter().for_each(|&m| self.q_epoch[m] += 1),
            None => self.q_epoch[q] += 1,
        }
    }

    fn wait(&mut self, q: usize, j: usize, why: Why, no_room: bool) {
        self.positions[q] += 1;
        self.waiting.push((q, self.positions[q], j, why, no_room, self.plan.preemptions.len()));
    }

    /// Step 5: the plan, waiting jobs sorted by queue name then position.
    fn into_plan(mut self, st: &State, order: &Order) -> Plan {
        let pending = st.snap.pending;
        let defined = st.c.queues.len();
        for (k, (queue, jobs)) in order.orphans.iter().enumerate() {
            let why = Why::new(
                format!("queue {queue} is not defined in the active config"),
                format!("Waiting for queue {queue}, which the active config no longer has"),
            );
            for (i, &j) in jobs.iter().enumerate() {
                self.waiting.push((defined + k, i + 1, j, why.clone(), false, 0));
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
        // Room only shrinks after the cycle's last preemption: a miss before it says nothing
        // of the jobs decided later (a victim's release may have made room for them).
        let preemptions = self.plan.preemptions.len();
        self.plan.pending = self
            .waiting
            .into_iter()
            .map(|(q, position, j, why, no_room, preempted_before)| {
                let queue = if q < defined { st.c.queues[q].name.clone() } else { pending[j].queue.clone() };
                let no_room = no_room && preempted_before == preemptions;
                PendingInfo { job: pending[j].id.clone(), queue, position, reason: why.reason, headline: why.headline, no_room }
            })
            .collect();
        self.plan
    }
}

/// A request for a resource queue `q` has no quota for.
fn uncovered(st: &State, q: usize, res: usize) -> Why {
    Why::new(explain::uncovered(st, q, res), explain::uncovered_headline(st, q, res))
}

impl super::compile::QueueDef {
    /// Number of resources interned by the config (beyond are names only jobs mention).
    fn resources_len(&self) -> usize {
        self.covered.len()
    }
}
