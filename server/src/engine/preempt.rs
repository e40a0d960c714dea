//! Step 4 of a cycle: picking victims for a job that fits nowhere — Kueue's classical
//! preemption (`pkg/scheduler/preemption`) for a flat cohort, plus node room.
//!
//! Candidates, for each flavor tuple in preference order whose quota could hold the job:
//! * **within the queue** (`within_resource_queue: lower_priority`): its running jobs of
//!   strictly lower priority that hold a cell the job lacks room in or run on a node it could
//!   use;
//! * **reclaim** (`reclaim_within_cohort`): jobs of cohort peers that borrow in a pool the job
//!   lacks room in and use it — of strictly lower priority for `lower_priority`, any for
//!   `any`. When the job keeps its queue within nominal, they may go whatever the job
//!   borrows; otherwise only if the job then borrows nothing, unless `borrow_within_cohort:
//!   lower_priority` lets a strictly lower-priority one go while the job borrows (*borrow*).
//!
//! Peers' jobs come first (reclaim before the others), then the queue's own; within each,
//! lowest priority first, then most recently started, then id. Kueue only preempts when the
//! request fits the nominal quota or `borrow_within_cohort` allows borrowing by preemption;
//! so does Berth. Candidates are removed one by one — released in the cycle's working copy
//! and put back afterwards, so nothing changes — skipping a peer once it no longer borrows,
//! until the job fits (quota and one node with room); then, like Kueue's
//! `fillBackWorkloads`, each victim but the last is put back if the job still fits without
//! it. Kueue tries the candidates allowing the job to borrow and then not (or the other way
//! round, see [`attempts`]). The result is the greedy-minimal set in that order.

// Rows, quota cells and node capacity are parallel arrays indexed by resource; an index
// loop over them reads more plainly than zipped iterators.
#![allow(clippy::needless_range_loop)]

use std::cmp::Reverse;

use super::assign::{combo_set, first_combo, next_combo, slot_of, Scratch};
use super::compile::Reclaim;
use super::plan::Kind;
use super::resources::Milli;
use super::state::State;

/// Why preemption did not help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoVictims {
    /// No running job the queue may preempt.
    NoCandidates,
    /// Even preempting every candidate would not make room.
    NotEnough,
    /// Only borrowing peers' jobs could make room, but the job would then borrow itself, and
    /// without `borrow_within_cohort` a queue reclaims only to stay within nominal.
    WouldBorrow,
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

/// Whether queue `q` may preempt a job of priority `theirs` for one of priority `prio`,
/// within itself (`own`) or in a cohort peer.
fn may_preempt(st: &State, q: usize, own: bool, prio: i64, theirs: i64) -> bool {
    let def = &st.c.queues[q];
    match own {
        true => def.preempt_lower_priority && theirs < prio,
        false => match def.reclaim {
            Reclaim::Never => false,
            Reclaim::LowerPriority => theirs < prio,
            Reclaim::Any => true,
        },
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
    let peers: &[usize] = st.c.queues[q].cohort.map_or(&[], |c| &st.c.cohorts[c].members);
    let any = |m: usize| {
        let own = m == q;
        (own || st.queue_borrowing(m))
            && st.victim_order[m].iter().any(|&i| !st.runs[i].victim && may_preempt(st, q, own, prio, running[i].priority))
    };
    if !any(q) && !peers.iter().any(|&m| m != q && any(m)) {
        return Err(NoVictims::NoCandidates);
    }
    if cache.known_to_fail(st.epoch, prio, row) {
        return Err(NoVictims::NotEnough);
    }
    sc.would_borrow = false;
    first_combo(st, q, sc);
    loop {
        if let Some(set) = st.simulating(|st| try_combo(st, q, prio, row, sc)) {
            sc.choice.clear();
            sc.choice.extend(sc.groups.iter().copied().zip(sc.idx.iter().copied()));
            return Ok(set);
        }
        if !next_combo(st, q, sc) {
            cache.remember(prio, row);
            return Err(if sc.would_borrow { NoVictims::WouldBorrow } else { NoVictims::NotEnough });
        }
    }
}

/// Candidates for the odometer's current tuple, then removal and fill-back.
fn try_combo(st: &mut State, q: usize, prio: i64, row: &[Milli], sc: &mut Scratch) -> Option<usize> {
    let def = &st.c.queues[q];
    // The cells this tuple charges; Kueue's gate, for each cell short of room: the request
    // fits the most the cell could hold, and its nominal quota unless the queue may preempt
    // while borrowing.
    sc.cells.clear();
    sc.short.clear();
    for k in 0..st.r {
        if row[k] == Milli::ZERO {
            continue;
        }
        let g = st.covered(q, k)?;
        let cell = st.cell(q, slot_of(sc, g), k);
        sc.cells.push((cell, row[k]));
        if row[k] > st.available(cell) {
            if row[k] > st.potential(cell) || (row[k] > st.quota[cell] && !def.borrow_preempt) {
                return None;
            }
            sc.short.push(cell);
        }
    }
    let set = combo_set(st, q, sc);
    let s = &st.sets[set];
    if s.nodes.is_empty() || row.iter().zip(&s.cap_max).any(|(a, m)| a > m) {
        return None;
    }
    let node_ok0 = st.place(set, row, def.placement.score).is_ok();
    let within_nominal = sc.cells.iter().all(|&(cell, a)| !st.borrows_with(cell, a));
    let under_nominal = sc.short.iter().all(|&cell| st.usage[cell] < st.quota[cell]);
    candidates(st, q, prio, set, within_nominal, sc);
    let hierarchy = sc.cands.iter().any(|c| c.1 == Kind::Reclaim);
    let from_peers = sc.cands.iter().any(|c| c.1 != Kind::Own);
    sc.would_borrow |= from_peers && !within_nominal && !def.borrow_preempt;
    for &borrow in attempts(from_peers, def.borrow_preempt, under_nominal, hierarchy) {
        if remove_until_fits(st, q, row, set, node_ok0, borrow, sc) {
            fill_back(st, row, set, node_ok0, borrow, sc);
            for &(v, _) in &sc.victims {
                st.restore(v);
            }
            return Some(set);
        }
        for &(v, _) in &sc.victims {
            st.restore(v);
        }
    }
    None
}

/// Kueue's order of attempts, allowing the preemptor to borrow (`true`) or not. Without
/// peers' candidates, or when it could not stay within nominal anyway: borrowing allowed.
/// Without `borrow_within_cohort` and without a peer it may reclaim from whatever it
/// borrows: first without borrowing, which every peer candidate allows.
fn attempts(from_peers: bool, borrow_preempt: bool, under_nominal: bool, hierarchy: bool) -> &'static [bool] {
    match () {
        _ if !from_peers || (!borrow_preempt && !under_nominal) => &[true],
        _ if !borrow_preempt && !hierarchy => &[false, true],
        _ => &[true, false],
    }
}

/// Fills `sc.cands` in preemption order: reclaimable peers' jobs, other peers' jobs, then
/// the queue's own.
fn candidates(st: &State, q: usize, prio: i64, set: usize, within_nominal: bool, sc: &mut Scratch) {
    let running = st.snap.running;
    let def = &st.c.queues[q];
    sc.cands.clear();
    if let Some(cohort) = def.cohort.filter(|_| def.reclaim != Reclaim::Never && !sc.short.is_empty()) {
        for &m in st.c.cohorts[cohort].members.iter().filter(|&&m| m != q) {
            if !borrows_in_short(st, m, sc) {
                continue;
            }
            for &i in &st.victim_order[m] {
                if st.runs[i].victim || !may_preempt(st, q, false, prio, running[i].priority) || !uses_short(st, i, sc) {
                    continue;
                }
                let kind = match () {
                    _ if within_nominal => Kind::Reclaim,
                    _ if def.borrow_preempt && running[i].priority < prio => Kind::Borrow,
                    _ => Kind::ReclaimWithoutBorrowing,
                };
                sc.cands.push((i, kind));
            }
        }
        // Victim order across peers: lowest priority, latest start, id — reclaim first.
        sc.cands.sort_by(|&(a, ka), &(b, kb)| {
            let (x, y) = (&running[a], &running[b]);
            (ka != Kind::Reclaim, x.priority, Reverse(x.started_at_ms), &x.id).cmp(&(kb != Kind::Reclaim, y.priority, Reverse(y.started_at_ms), &y.id))
        });
    }
    if def.preempt_lower_priority {
        for &i in st.victim_order[q].iter().take_while(|&&i| running[i].priority < prio) {
            let on_set_node = st.runs[i].node.is_some_and(|n| st.sets[set].member[n]);
            if !st.runs[i].victim && (on_set_node || uses_short(st, i, sc)) {
                sc.cands.push((i, Kind::Own));
            }
        }
    }
}

/// Whether running job `i` holds quota in a cell the job lacks room in, or in its pool.
fn uses_short(st: &State, i: usize, sc: &Scratch) -> bool {
    st.charges[st.runs[i].charges.clone()].iter().any(|&(cell, _)| {
        sc.short.iter().any(|&s| s == cell || (st.pool(s).is_some() && st.pool(s) == st.pool(cell)))
    })
}

/// Whether peer `m` uses more than its nominal in a pool the job lacks room in.
fn borrows_in_short(st: &State, m: usize, sc: &Scratch) -> bool {
    let def = &st.c.queues[m];
    sc.short.iter().filter_map(|&s| st.pool(s)).any(|p| {
        let (_, flavor, k) = st.pools[p];
        let Some(slot) = def.slots.iter().position(|s| s.flavor == flavor) else { return false };
        def.covered.get(k).copied().flatten() == Some(def.slots[slot].group) && st.borrowing(st.cell(m, slot, k))
    })
}

/// Greedy removal in candidate order until the job fits; the victims are left released.
fn remove_until_fits(st: &mut State, q: usize, row: &[Milli], set: usize, node_ok0: bool, borrow: bool, sc: &mut Scratch) -> bool {
    sc.victims.clear();
    let running = st.snap.running;
    for ci in 0..sc.cands.len() {
        let (v, kind) = sc.cands[ci];
        if kind != Kind::Own {
            let m = st.c.queue_ids.get(&*running[v].queue).copied().unwrap_or(q);
            if (borrow && kind == Kind::ReclaimWithoutBorrowing) || !borrows_in_short(st, m, sc) {
                continue;
            }
        }
        st.release(v);
        sc.victims.push((v, kind.cause()));
        if fits(st, row, set, node_ok0, borrow, sc) {
            return true;
        }
    }
    false
}

/// Puts back each victim but the last if the job still fits without it.
fn fill_back(st: &mut State, row: &[Milli], set: usize, node_ok0: bool, borrow: bool, sc: &mut Scratch) {
    let mut i = sc.victims.len().saturating_sub(1);
    while i > 0 {
        i -= 1;
        let v = sc.victims[i].0;
        st.restore(v);
        let victim = sc.victims.remove(i);
        if !fits(st, row, set, node_ok0, borrow, sc) {
            st.release(v);
            sc.victims.insert(i, victim);
        }
    }
}

/// Whether the job fits with the current victims released: quota in every cell (without
/// borrowing unless allowed) and a node of the set with room.
fn fits(st: &State, row: &[Milli], set: usize, node_ok0: bool, borrow: bool, sc: &Scratch) -> bool {
    let quota = sc.cells.iter().all(|&(cell, a)| a <= st.available(cell) && (borrow || !st.borrows_with(cell, a)));
    quota && (node_ok0 || node_ok(st, row, set, sc))
}

/// Whether a node of the set freed by a victim now has room for `row`, on a backend with a
/// run to spare.
fn node_ok(st: &State, row: &[Milli], set: usize, sc: &Scratch) -> bool {
    let r = st.r;
    sc.victims.iter().filter_map(|&(v, _)| st.runs[v].node).filter(|&n| st.sets[set].member[n]).any(|n| {
        (0..r).all(|k| st.free[n * r + k] >= row[k]) && st.backend_full(n).is_none()
    })
}
