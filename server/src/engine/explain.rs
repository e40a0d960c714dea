//! Reasons: the sentences a waiting job carries, shown verbatim by the dashboard, and a
//! one-line headline of each built from the same misses ([`headline`]):
//! `Waiting for CPU: 2 of 2 in use in vision; nothing of lower priority to preempt`.
//!
//! One sentence per flavor tried, in the order tried, prefixed by the queue:
//! `queue research: flavor spot: gpu quota 64, in use 60, requested 8; flavor on-demand: no
//! node matches market in [on-demand]`. Numbers are printed as the config writes them. In a
//! cohort the quota sentence says what the cohort can lend and the borrowing limit:
//! `flavor any: cpu nominal 2, in use 5, requested 1; cohort research has 0 idle of 3
//! lendable; borrowing limit 3, borrowed 3`.

use std::fmt::Write;
use std::sync::Arc;

use super::assign::Miss;
use super::compile::Reclaim;
use super::preempt::NoVictims;
use super::resources::Milli;
use super::state::State;

/// `cpu 8, gpu 1` for the non-zero amounts of a row.
fn request(st: &State, row: &[Milli]) -> String {
    let mut s = String::new();
    for (k, a) in row.iter().enumerate().filter(|(_, a)| **a != Milli::ZERO) {
        if !s.is_empty() {
            s.push_str(", ");
        }
        let _ = write!(s, "{} {a}", st.names[k]);
    }
    s
}

/// ` (capacity cpu 4, of which 3 in use outside Berth)` for the requested resources that
/// work Berth did not start takes on these nodes (summed over them); empty when none.
fn used_outside(st: &State, nodes: &[usize], row: &[Milli]) -> String {
    let mut parts = Vec::new();
    for (k, _) in row.iter().enumerate().filter(|(_, a)| **a != Milli::ZERO) {
        let name = &st.names[k];
        let (mut cap, mut outside) = (Milli::ZERO, Milli::ZERO);
        for &n in nodes {
            cap = cap.plus(st.cap[n * st.r + k]);
            outside = outside.plus(st.snap.nodes[st.nodes[n]].used_outside.get(name));
        }
        if outside > Milli::ZERO {
            parts.push(format!("{name} {cap}, of which {outside} in use outside Berth"));
        }
    }
    if parts.is_empty() {
        return String::new();
    }
    format!(" (capacity {})", parts.join("; "))
}

/// `flavor spot` or `flavors spot + ssd`.
fn flavors(st: &State, set: usize) -> String {
    let names: Vec<&str> = st.sets[set].flavors.iter().map(|&f| &*st.c.flavors[f].name).collect();
    match names.as_slice() {
        [one] => format!("flavor {one}"),
        many => format!("flavors {}", many.join(" + ")),
    }
}

/// The full reason for a job that fits nowhere.
pub(crate) fn no_fit(st: &State, q: usize, row: &[Milli], misses: &[Miss], preempt: Option<NoVictims>, prio: i64) -> String {
    let def = &st.c.queues[q];
    let mut out = format!("queue {}: ", def.name);
    for (i, m) in misses.iter().enumerate() {
        if i > 0 {
            out.push_str("; ");
        }
        match *m {
            Miss::Quota { slot, res, quota, used } => {
                let _ = write!(
                    out,
                    "flavor {}: {} quota {quota}, in use {used}, requested {}",
                    st.c.flavors[def.slots[slot].flavor].name, st.names[res], row[res]
                );
            }
            Miss::Pool { slot, res } => pool(&mut out, st, q, slot, res, row[res]),
            Miss::NoNodeMatches { set } => {
                let described: Vec<&str> = st.sets[set]
                    .flavors
                    .iter()
                    .map(|&f| st.c.flavors[f].described.as_str())
                    .filter(|d| !d.is_empty())
                    .collect();
                if described.is_empty() {
                    let _ = write!(out, "{}: no node is available", flavors(st, set));
                } else {
                    let _ = write!(out, "{}: no node matches {}", flavors(st, set), described.join(" and "));
                }
            }
            Miss::NoRoom { set } => {
                let nodes = &st.sets[set].nodes;
                let req = request(st, row);
                let outside = used_outside(st, nodes, row);
                if let [only] = nodes[..] {
                    let id = &st.snap.nodes[st.nodes[only]].id;
                    let _ = write!(out, "{}: the only matching node, {id}, has no room for {req}{outside}", flavors(st, set));
                } else {
                    let _ = write!(out, "{}: none of the {} matching nodes has room for {req}{outside}", flavors(st, set), nodes.len());
                }
            }
            Miss::InFlight { limit } => {
                let l = &st.snap.limits[limit];
                let _ = write!(out, "cluster {}: {} of {} in flight", l.backend, st.in_flight[limit], l.max_in_flight);
            }
        }
    }
    let reclaims = def.cohort.is_some() && def.reclaim != Reclaim::Never;
    match (preempt, reclaims, def.preempt_lower_priority) {
        (None, ..) => {}
        (Some(NoVictims::NoCandidates), false, _) => {
            let _ = write!(out, "; no running job below priority {prio} left to preempt");
        }
        (Some(NoVictims::NoCandidates), true, own) => {
            let peers = if def.reclaim == Reclaim::Any { "no job of a borrowing peer" } else { "no lower-priority job of a borrowing peer" };
            let own = if own { format!(" and no running job below priority {prio} in the queue") } else { String::new() };
            let _ = write!(out, "; {peers} to reclaim{own}");
        }
        (Some(NoVictims::NotEnough), false, _) => out.push_str("; preempting every lower-priority job would not make room"),
        (Some(NoVictims::NotEnough), true, _) => out.push_str("; preempting every job it may preempt would not make room"),
        (Some(NoVictims::WouldBorrow), ..) => out.push_str(
            "; it would borrow, and without borrow_within_cohort a queue reclaims only to stay within its nominal quota",
        ),
    }
    out
}

/// `flavor any: cpu nominal 2, in use 5, requested 1; cohort research has 0 idle of 3
/// lendable; borrowing limit 3, borrowed 3`, plus, for a queue whose own nominal is lent
/// out and that does not reclaim, that it waits for the borrowers.
fn pool(out: &mut String, st: &State, q: usize, slot: usize, res: usize, requested: Milli) {
    let def = &st.c.queues[q];
    let cell = st.cell(q, slot, res);
    let (t, used) = (st.terms(cell), st.usage[cell]);
    let Some(p) = st.pool(cell) else { return };
    let cohort = &st.c.cohorts[def.cohort.unwrap_or_default()].name;
    let idle = if st.pool_cap[p] == Milli::UNLIMITED { Milli::UNLIMITED } else { st.pool_cap[p].minus(st.pool_used[p]).max(Milli::ZERO) };
    let _ = write!(
        out,
        "flavor {}: {} nominal {}, in use {used}, requested {requested}; cohort {cohort} has {idle} idle of {} lendable",
        st.c.flavors[def.slots[slot].flavor].name, st.names[res], t.nominal, st.pool_cap[p]
    );
    if t.limit != Milli::UNLIMITED {
        let _ = write!(out, "; borrowing limit {}, borrowed {}", t.limit, t.borrowed(used));
    }
    if !st.borrows_with(cell, requested) && def.reclaim == Reclaim::Never && t.in_pool(used) < t.lend {
        let _ = write!(out, "; its nominal quota is lent to peers and reclaim_within_cohort is never: it waits for them to finish");
    }
}

/// A requested resource the queue does not provide.
pub(crate) fn uncovered(st: &State, q: usize, res: usize) -> String {
    format!("queue {}: no resource group covers {}", st.c.queues[q].name, st.names[res])
}

/// A job behind a blocked head in a `strict_fifo` queue.
pub(crate) fn blocked(queue: &str, head: &str) -> String {
    format!("queue {queue}: strict_fifo: waiting behind {head}, which does not fit")
}

/// Why a job waits, twice: a headline for people and the full explanation (every flavor
/// tried, with numbers). Shared between jobs that wait alike.
#[derive(Debug, Clone)]
pub(crate) struct Why {
    pub reason: Arc<str>,
    pub headline: Arc<str>,
}

impl Why {
    pub(crate) fn new(reason: impl Into<Arc<str>>, headline: impl Into<Arc<str>>) -> Why {
        Why { reason: reason.into(), headline: headline.into() }
    }
}

/// A resource as people name it: `CPU`, `GPU`, `memory`; custom names as written.
fn resource_word(name: &str) -> &str {
    match name {
        "cpu" => "CPU",
        "gpu" => "GPU",
        "tpu" => "TPU",
        "memory_gb" => "memory",
        other => other,
    }
}

/// The headline of [`no_fit`]: what the first flavor tried lacks, then why preemption does
/// not help. `Waiting for CPU: 2 of 2 in use in vision; nothing of lower priority to preempt`.
pub(crate) fn headline(st: &State, q: usize, row: &[Milli], misses: &[Miss], preempt: Option<NoVictims>) -> String {
    let def = &st.c.queues[q];
    let mut out = match misses.first() {
        Some(&Miss::Quota { res, quota, used, .. }) => {
            format!("Waiting for {}: {used} of {quota} in use in {}", resource_word(&st.names[res]), def.name)
        }
        Some(&Miss::Pool { res, .. }) => {
            let cohort = def.cohort.map_or("", |c| &*st.c.cohorts[c].name);
            format!("Waiting for {}: {}'s quota is in use and cohort {cohort} has none to lend", resource_word(&st.names[res]), def.name)
        }
        Some(&Miss::NoNodeMatches { set }) => format!("Waiting for a node: none matches {}", flavors(st, set)),
        Some(&Miss::NoRoom { .. }) => format!("Waiting for room: no matching node has {} free", request(st, row)),
        Some(&Miss::InFlight { limit }) => {
            let l = &st.snap.limits[limit];
            format!("Waiting for cluster {}: {} of {} starts in flight", l.backend, st.in_flight[limit], l.max_in_flight)
        }
        None => format!("Waiting in {}", def.name),
    };
    let reclaims = def.cohort.is_some() && def.reclaim != Reclaim::Never;
    out.push_str(match (preempt, reclaims) {
        (None, _) => "",
        (Some(NoVictims::NoCandidates), false) => "; nothing of lower priority to preempt",
        (Some(NoVictims::NoCandidates), true) => "; nothing to preempt or reclaim",
        (Some(NoVictims::NotEnough), _) => "; preempting would not make room",
        (Some(NoVictims::WouldBorrow), _) => "; it would have to borrow",
    });
    out
}

/// The headline of [`uncovered`].
pub(crate) fn uncovered_headline(st: &State, q: usize, res: usize) -> String {
    format!("Cannot run in {}: it has no quota for {}", st.c.queues[q].name, resource_word(&st.names[res]))
}

/// The headline of [`blocked`].
pub(crate) fn blocked_headline(head: &str) -> String {
    format!("Waiting behind {head}, first in line (strict FIFO)")
}
