//! Step 3 of a cycle: flavor assignment — does this job fit, and under which flavors, where?
//!
//! For each resource group the request touches, the group's flavors are tried in order; with
//! several groups, flavor tuples are tried in lexicographic preference order (the first
//! group's preference dominates). A tuple fits when, for every requested resource, the
//! queue's usage plus the request stays within that flavor's nominal quota — or, in a
//! cohort, within what the queue may take from the cohort's pool (`cohort.rs`) — AND one
//! node matching *every* chosen flavor's selector has free room for the *whole* request — a
//! job runs on exactly one node. The queue's placement policy picks among fitting nodes.
//! A tuple that fits without borrowing is preferred to an earlier one that must borrow
//! (Kueue's `whenCanBorrow: TryNextFlavor`). Each flavor that does not fit leaves a [`Miss`]
//! for the explanation.

use super::resources::Milli;
use super::state::{NoPlace, State};

/// Why one flavor (or flavor tuple) did not take the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Miss {
    /// Quota of `slot` for resource `res` would be exceeded.
    Quota { slot: usize, res: usize, quota: Milli, used: Milli },
    /// In a cohort: neither the queue's nominal quota nor what it may take from the pool
    /// holds the request (or, before the borrowing pass, it would have to borrow).
    Pool { slot: usize, res: usize },
    /// No node matches the flavors' selectors.
    NoNodeMatches { set: usize },
    /// Nodes match, but none has room.
    NoRoom { set: usize },
    /// A node has room, but its backend already has as many runs in flight as it allows.
    InFlight { limit: usize },
}

/// Buffers reused job after job so the hot path does not allocate.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// Groups the current request touches, ascending.
    pub groups: Vec<usize>,
    /// Odometer: the slot chosen for each entry of `groups`.
    pub idx: Vec<usize>,
    /// Quota verdict per slot of the current queue, and whether the slot would borrow.
    pub slot_miss: Vec<Option<Miss>>,
    pub slot_borrows: Vec<bool>,
    /// The first tuple that fits only by borrowing, kept while a later one might not need to.
    pub fallback: Vec<usize>,
    /// Misses in the order tried.
    pub misses: Vec<Miss>,
    pub flavors: Vec<usize>,
    /// On success: (group, slot) pairs chosen.
    pub choice: Vec<(usize, usize)>,
    /// Preemption buffers: candidates, chosen victims, the job's (cell, amount) pairs and
    /// the pools it lacks room in.
    pub cands: Vec<(usize, super::plan::Kind)>,
    pub victims: Vec<(usize, super::plan::Cause)>,
    pub cells: Vec<(usize, Milli)>,
    pub short: Vec<usize>,
    /// Peers' jobs were candidates only if the job borrowed nothing, and it would have.
    pub would_borrow: bool,
}

/// Outcome of [`fit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fit {
    /// Fits on `node` under `Scratch::choice`.
    Fits { node: usize },
    /// Resource `res` is covered by no group of the queue.
    Uncovered { res: usize },
    /// Nothing fits; see `Scratch::misses`.
    Nowhere,
}

/// Fills `sc.groups` with the groups `row` touches; `Err(res)` for an uncovered resource.
pub(crate) fn needed_groups(st: &State, q: usize, row: &[Milli], sc: &mut Scratch) -> Result<(), usize> {
    sc.groups.clear();
    for (k, &a) in row.iter().enumerate() {
        if a == Milli::ZERO {
            continue;
        }
        let g = st.covered(q, k).ok_or(k)?;
        if !sc.groups.contains(&g) {
            sc.groups.push(g);
        }
    }
    sc.groups.sort_unstable();
    Ok(())
}

/// Starts the odometer at every group's first flavor.
pub(crate) fn first_combo(st: &State, q: usize, sc: &mut Scratch) {
    let def = &st.c.queues[q];
    sc.idx.clear();
    sc.idx.extend(sc.groups.iter().map(|&g| def.groups[g].slots.start));
}

/// Advances the odometer (last group fastest); false when every tuple was tried.
pub(crate) fn next_combo(st: &State, q: usize, sc: &mut Scratch) -> bool {
    let def = &st.c.queues[q];
    for k in (0..sc.idx.len()).rev() {
        let range = &def.groups[sc.groups[k]].slots;
        sc.idx[k] += 1;
        if sc.idx[k] < range.end {
            return true;
        }
        sc.idx[k] = range.start;
    }
    false
}

/// The node set of the odometer's current flavor tuple.
pub(crate) fn combo_set(st: &mut State, q: usize, sc: &mut Scratch) -> usize {
    let def = &st.c.queues[q];
    sc.flavors.clear();
    sc.flavors.extend(sc.idx.iter().map(|&s| def.slots[s].flavor));
    if let [f] = sc.flavors[..] {
        return f; // single-flavor sets were built first, at index = flavor
    }
    sc.flavors.sort_unstable();
    sc.flavors.dedup();
    let flavors = std::mem::take(&mut sc.flavors);
    let set = st.set_for(&flavors);
    sc.flavors = flavors;
    set
}

/// The slot chosen for group `g` in the odometer's current tuple.
pub(crate) fn slot_of(sc: &Scratch, g: usize) -> usize {
    let k = sc.groups.iter().position(|&x| x == g).unwrap_or(0);
    sc.idx[k]
}

/// Whether `slot` (of group `g`) has quota left for `row`: the first resource that does not;
/// else whether it would borrow. Without `borrow`, borrowing is a miss.
fn quota_miss(st: &State, q: usize, slot: usize, g: usize, row: &[Milli], borrow: bool) -> (Option<Miss>, bool) {
    let mut borrows = false;
    for &k in &st.c.queues[q].groups[g].resources {
        let a = row.get(k).copied().unwrap_or_default();
        if a == Milli::ZERO {
            continue;
        }
        let cell = st.cell(q, slot, k);
        if st.pool(cell).is_some() {
            let over = st.borrows_with(cell, a);
            if a > st.available(cell) || (over && !borrow) {
                return (Some(Miss::Pool { slot, res: k }), false);
            }
            borrows |= over;
            continue;
        }
        let (used, quota) = (st.usage[cell], st.quota[cell]);
        if used.plus(a) > quota {
            return (Some(Miss::Quota { slot, res: k, quota, used }), false);
        }
    }
    (None, borrows) // resources only jobs mention are unlimited in the default queue
}

/// Tries every flavor tuple in preference order (step 3: assign flavors); without `borrow`,
/// only within the queue's nominal quota.
pub(crate) fn fit(st: &mut State, q: usize, row: &[Milli], sc: &mut Scratch, borrow: bool) -> Fit {
    if let Err(res) = needed_groups(st, q, row, sc) {
        return Fit::Uncovered { res };
    }
    sc.misses.clear();
    let def = &st.c.queues[q];
    sc.slot_miss.clear();
    sc.slot_miss.resize(def.slots.len(), None);
    sc.slot_borrows.clear();
    sc.slot_borrows.resize(def.slots.len(), false);
    for &g in &sc.groups {
        for slot in def.groups[g].slots.clone() {
            (sc.slot_miss[slot], sc.slot_borrows[slot]) = quota_miss(st, q, slot, g, row, borrow);
        }
    }
    let score = def.placement.score;
    let mut fallback: Option<usize> = None;
    first_combo(st, q, sc);
    loop {
        let mut quota_ok = true;
        let mut borrows = false;
        for k in 0..sc.idx.len() {
            borrows |= sc.slot_borrows[sc.idx[k]];
            if let Some(m) = sc.slot_miss[sc.idx[k]] {
                quota_ok = false;
                if !sc.misses.contains(&m) {
                    sc.misses.push(m);
                }
            }
        }
        // With a borrowing tuple in hand, only one that needs no borrowing is worth placing.
        if quota_ok && !(borrows && fallback.is_some()) {
            let set = combo_set(st, q, sc);
            match st.place(set, row, score) {
                Ok(node) if !borrows => {
                    sc.choice.clear();
                    sc.choice.extend(sc.groups.iter().copied().zip(sc.idx.iter().copied()));
                    return Fit::Fits { node };
                }
                Ok(node) => {
                    fallback = Some(node);
                    sc.fallback.clear();
                    sc.fallback.extend_from_slice(&sc.idx);
                }
                Err(why) => {
                    let m = match why {
                        _ if st.sets[set].nodes.is_empty() => Miss::NoNodeMatches { set },
                        NoPlace::NoRoom => Miss::NoRoom { set },
                        NoPlace::InFlight { limit } => Miss::InFlight { limit },
                    };
                    if !sc.misses.contains(&m) {
                        sc.misses.push(m);
                    }
                }
            }
        }
        if !next_combo(st, q, sc) {
            let Some(node) = fallback else { return Fit::Nowhere };
            sc.choice.clear();
            sc.choice.extend(sc.groups.iter().copied().zip(sc.fallback.iter().copied()));
            return Fit::Fits { node };
        }
    }
}
