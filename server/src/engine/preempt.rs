//! Step 4 of a cycle: picking victims for a job that fits nowhere.
//!
//! Only for queues with `within_resource_queue: lower_priority`. Candidates are the queue's
//! running jobs of strictly lower priority that are not victims already (jobs admitted this
//! cycle are not running yet, so never candidates), taken lowest priority first, then most
//! recently started. For each flavor tuple in preference order whose quota could hold the
//! job at all, candidates are removed one by one *in a simulation* (running sums over a
//! scratch copy of the affected quota cells and nodes; nothing in the state changes) until
//! the job fits — quota and one node with room — and then, like Kueue's
//! `fillBackWorkloads`, each victim but the last is put back if the job still fits without
//! it. The result is the greedy-minimal set in that order, not a global optimum.

// Rows, quota cells and node capacity are parallel arrays indexed by resource; an index
// loop over them reads more plainly than zipped iterators.
#![allow(clippy::needless_range_loop)]

use super::assign::{combo_set, first_combo, next_combo, slot_of, Scratch};
use super::resources::Milli;
use super::state::State;

/// Why preemption did not help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoVictims {
    /// No running job of lower priority in the queue.
    NoCandidates,
    /// Even preempting every candidate would not make room.
    NotEnough,
}

/// Remembers failed (priority, request) pairs per queue: a job of lower-or-equal priority
/// asking at least as much cannot succeed either, until something is released.
#[derive(Debug, Default)]
pub(crate) struct FailCache {
    epoch: u64,
    entries: Vec<(i64, Vec<Milli>)>,
}

impl FailCache {
    fn known_to_fail(&mut self, epoch: u64, prio: i64, row: &[Milli]) -> bool {
        if self.epoch != epoch {
            self.entries.clear();
            self.epoch = epoch;
        }
        self.entries.iter().any(|(p, f)| prio <= *p && f.iter().zip(row).all(|(f, a)| f <= a))
    }

    fn remember(&mut self, prio: i64, row: &[Milli]) {
        if self.entries.len() == 8 {
            self.entries.remove(0);
        }
        self.entries.push((prio, row.to_vec()));
    }
}

/// Finds victims so a job of priority `prio` asking `row` fits in queue `q`.
///
/// Requires `sc.groups` from a failed `assign::fit`. On success `sc.victims` holds the
/// victims in the order chosen and `sc.choice` the flavor tuple they make room in.
pub(crate) fn find(
    st: &mut State,
    q: usize,
    prio: i64,
    row: &[Milli],
    sc: &mut Scratch,
    cache: &mut FailCache,
) -> Result<usize, NoVictims> {
    let running = st.snap.running;
    sc.cands.clear();
    sc.cands.extend(
        st.victim_order[q].iter().copied().take_while(|&i| running[i].priority < prio).filter(|&i| !st.runs[i].victim),
    );
    if sc.cands.is_empty() {
        return Err(NoVictims::NoCandidates);
    }
    if cache.known_to_fail(st.epoch, prio, row) {
        return Err(NoVictims::NotEnough);
    }
    let r = st.r;
    let score = st.c.queues[q].placement.score;
    first_combo(st, q, sc);
    loop {
        if let Some(set) = try_combo(st, q, row, score, sc, r) {
            sc.choice.clear();
            sc.choice.extend(sc.groups.iter().copied().zip(sc.idx.iter().copied()));
            return Ok(set);
        }
        if !next_combo(st, q, sc) {
            cache.remember(prio, row);
            return Err(NoVictims::NotEnough);
        }
    }
}

/// Greedy removal then fill-back for the odometer's current flavor tuple.
fn try_combo(st: &mut State, q: usize, row: &[Milli], score: fn(i64) -> i64, sc: &mut Scratch, r: usize) -> Option<usize> {
    // Quota cells this tuple charges, and how much must be freed in each.
    sc.deficits.clear();
    for k in 0..r {
        if row[k] == Milli::ZERO {
            continue;
        }
        let g = st.covered(q, k)?;
        let cell = st.cell(q, slot_of(sc, g), k);
        if row[k] > st.quota[cell] {
            return None; // even an empty queue could not hold it under this flavor
        }
        let need = st.usage[cell].plus(row[k]).minus(st.quota[cell]);
        if need > Milli::ZERO {
            sc.deficits.push((cell, need, Milli::ZERO));
        }
    }
    let set = combo_set(st, q, sc);
    let s = &st.sets[set];
    if s.nodes.is_empty() || row.iter().zip(&s.cap_max).any(|(a, m)| a > m) {
        return None;
    }
    let node_ok0 = st.place(set, row, score).is_ok();

    // Greedy: remove candidates in victim order until the job fits.
    sc.victims.clear();
    sc.extra_nodes.clear();
    sc.extra.clear();
    let mut fits = false;
    for ci in 0..sc.cands.len() {
        let v = sc.cands[ci];
        let on_set_node = st.runs[v].node.is_some_and(|n| st.sets[set].member[n]);
        let holds_deficit = st.charges[st.runs[v].charges.clone()].iter().any(|(c, _)| sc.deficits.iter().any(|d| d.0 == *c));
        if !on_set_node && !holds_deficit {
            continue; // removing it could not help this tuple
        }
        sc.victims.push(v);
        apply(st, sc, set, v, true);
        if quota_ok(sc) && (node_ok0 || node_ok(st, sc, row)) {
            fits = true;
            break;
        }
    }
    if !fits {
        return None;
    }
    // Fill back: keep only victims the job cannot do without (the last one it needs).
    let mut i = sc.victims.len().saturating_sub(1);
    while i > 0 {
        i -= 1;
        let v = sc.victims[i];
        apply(st, sc, set, v, false);
        if quota_ok(sc) && (node_ok0 || node_ok(st, sc, row)) {
            sc.victims.remove(i);
        } else {
            apply(st, sc, set, v, true);
        }
    }
    Some(set)
}

/// Adds (or takes back) victim `v`'s share to the simulated freed amounts.
fn apply(st: &State, sc: &mut Scratch, set: usize, v: usize, remove: bool) {
    let r = st.r;
    for &(cell, amount) in &st.charges[st.runs[v].charges.clone()] {
        for d in sc.deficits.iter_mut().filter(|d| d.0 == cell) {
            d.2 = if remove { d.2.plus(amount) } else { d.2.minus(amount) };
        }
    }
    let Some(n) = st.runs[v].node.filter(|&n| st.sets[set].member[n]) else { return };
    let at = match sc.extra_nodes.iter().position(|&x| x == n) {
        Some(at) => at,
        None => {
            sc.extra_nodes.push(n);
            sc.extra.extend(std::iter::repeat_n(Milli::ZERO, r));
            sc.extra_nodes.len() - 1
        }
    };
    for k in 0..r {
        let a = st.run_rows[v * r + k];
        let e = &mut sc.extra[at * r + k];
        *e = if remove { e.plus(a) } else { e.minus(a) };
    }
}

fn quota_ok(sc: &Scratch) -> bool {
    sc.deficits.iter().all(|&(_, need, freed)| freed >= need)
}

/// Whether some node freed by the simulated victims now has room for `row`, on a backend
/// with a run to spare once the victims' runs end.
fn node_ok(st: &State, sc: &Scratch, row: &[Milli]) -> bool {
    let r = st.r;
    sc.extra_nodes.iter().enumerate().any(|(at, &n)| {
        (0..r).all(|k| st.free[n * r + k].plus(sc.extra[at * r + k]) >= row[k]) && slot_after(st, sc, n)
    })
}

/// Whether node `n`'s backend has a run to spare once the simulated victims end.
fn slot_after(st: &State, sc: &Scratch, n: usize) -> bool {
    let Some(l) = st.backend_full(n) else { return true };
    sc.victims.iter().any(|&v| st.runs[v].node.is_some_and(|m| st.node_limit[m] == Some(l)))
}
