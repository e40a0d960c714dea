//! Step 1 of a cycle: the snapshot turned into dense, mutable tables the cycle works on.
//!
//! Everything the hot path touches is an index into flat `Vec<Milli>`s: requests are rows of
//! `r` amounts (one per interned resource), quota usage is `(queue slot) × r`, node capacity
//! is `node × r`. Building it charges every running job to its queue's flavor quota and to
//! its node. The cycle then mutates this *copy*, never the snapshot: admissions charge it,
//! preemption releases victims from it.

// Rows, quota cells and node capacity are parallel arrays indexed by resource; an index
// loop over them reads more plainly than zipped iterators.
#![allow(clippy::needless_range_loop)]

use std::collections::HashMap;
use std::ops::Range;

use app::config::selector;

use super::compile::Compiled;
use super::resources::{Milli, Name};
use super::snapshot::{InFlightLimit, Snapshot};

/// How many failed request shapes a node set remembers (see [`NodeSet::fails`]).
const FAIL_MEMORY: usize = 8;

/// The nodes matching one flavor (or one tuple of flavors, for multi-group requests).
#[derive(Debug)]
pub(crate) struct NodeSet {
    /// Flavors whose selectors all match these nodes.
    pub flavors: Vec<usize>,
    /// Node indices (in id order).
    pub nodes: Vec<usize>,
    /// Membership by node index, for "does freeing this victim's node help?".
    pub member: Vec<bool>,
    /// Largest capacity per resource over the set: a request above it never fits.
    pub cap_max: Vec<Milli>,
    /// An upper bound of the largest free amount per resource. Admissions only shrink free
    /// capacity, so a bound computed by a scan stays valid until something is released.
    pub bound: Vec<Milli>,
    /// Request rows that found no node with room. Any request at least as big in every
    /// resource cannot fit either, so it is refused without a scan — the cheap path that
    /// keeps a 100k backlog fast once the cluster is full.
    pub fails: Vec<Vec<Milli>>,
    /// `State::epoch` when `bound` and `fails` were last valid.
    pub epoch: u64,
}

/// `limit` when it is set and its backend has as many runs in flight as it allows (a free
/// function, so [`State::place`] can ask while it holds a node set).
/// A usage cell outside any cohort has no pool cell (see `cohort.rs`).
pub(crate) const NO_POOL: u32 = u32::MAX;

fn full_limit(limit: Option<usize>, in_flight: &[usize], limits: &[InFlightLimit]) -> Option<usize> {
    limit.filter(|&l| in_flight[l] >= limits[l].max_in_flight)
}

/// Why [`State::place`] found no node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoPlace {
    /// No node of the set has room.
    NoRoom,
    /// Some node has room, but its backend has the most runs in flight it allows
    /// (`limit` indexes `Snapshot::limits`).
    InFlight { limit: usize },
}

/// A running job as the cycle sees it.
#[derive(Debug)]
pub(crate) struct Run {
    pub node: Option<usize>,
    /// Range into `State::charges`.
    pub charges: Range<usize>,
    pub victim: bool,
}

/// The mutable working copy of one cycle.
#[derive(Debug)]
pub(crate) struct State<'a> {
    pub snap: Snapshot<'a>,
    pub c: &'a Compiled,
    /// Resources: the config's, then names only jobs or nodes mention.
    pub names: Vec<Name>,
    pub r: usize,
    /// Node indices into `snap.nodes`, sorted by id so placement ties are input-order free.
    pub nodes: Vec<usize>,
    /// Per node index: the in-flight limit of its backend (index into `snap.limits`).
    pub node_limit: Vec<Option<usize>>,
    /// Per limit: runs in flight on that backend, admissions of this cycle included.
    pub in_flight: Vec<usize>,
    pub cap: Vec<Milli>,
    pub free: Vec<Milli>,
    /// First global slot of each queue.
    pub slot_base: Vec<usize>,
    pub usage: Vec<Milli>,
    pub quota: Vec<Milli>,
    /// Per usage cell: its cohort pool cell (see `cohort.rs`), `NO_POOL` outside a cohort.
    pub pool_of: Vec<u32>,
    /// Per usage cell: lending and borrowing limits (meaningful only in a pool).
    pub lend: Vec<Milli>,
    pub limit: Vec<Milli>,
    /// Per pool cell (cohort × flavor × resource): what members lend, and what of it is in
    /// use, and which (cohort, flavor, resource) it is.
    pub pool_cap: Vec<Milli>,
    pub pool_used: Vec<Milli>,
    pub pools: Vec<(usize, usize, usize)>,
    /// Per cohort × resource: what its members lend over all flavors (fair sharing divides by it).
    pub lendable: Vec<Milli>,
    pub sets: Vec<NodeSet>,
    pub set_ids: HashMap<Box<[usize]>, usize>,
    /// Pending requests as rows; `pending_bad` flags rows the engine must not admit.
    pub rows: Vec<Milli>,
    pub pending_bad: Vec<Option<&'static str>>,
    pub runs: Vec<Run>,
    pub run_rows: Vec<Milli>,
    /// (usage cell, amount) a running job holds, for releasing it.
    pub charges: Vec<(usize, Milli)>,
    /// Per queue: running jobs in victim order (lowest priority, then latest start, then id).
    pub victim_order: Vec<Vec<usize>>,
    /// Bumped whenever capacity or quota is released (a victim), invalidating caches that
    /// rely on "things only get fuller during a cycle". A preemption simulation that puts
    /// everything back restores it (see [`State::simulating`]); values are never reused.
    pub epoch: u64,
    epochs: u64,
}

impl<'a> State<'a> {
    /// Builds the working copy (step 1: snapshot).
    pub fn build(snap: Snapshot<'a>) -> State<'a> {
        let c = snap.config;
        let mut names = c.resources.clone();
        // Requests usually share their names' allocations (the admission loop's do), so a
        // name at the address of the last one matched needs no comparison of text.
        let mut last: Option<(*const u8, usize)> = None;
        let mut find = |names: &[Name], n: &Name| -> Option<usize> {
            if let Some((_, k)) = last.filter(|(at, _)| *at == n.as_ptr()) {
                debug_assert_eq!(names[k], *n);
                return Some(k);
            }
            let k = names.iter().position(|x| x == n)?;
            last = Some((n.as_ptr(), k));
            Some(k)
        };
        let jobs = snap.pending.iter().map(|p| &p.request).chain(snap.running.iter().map(|j| &j.request));
        for req in jobs {
            for (n, _) in req.iter() {
                if find(&names, n).is_none() {
                    names.push(n.clone());
                }
            }
        }
        let r = names.len();
        let index = |names: &[Name], n: &str| names.iter().position(|x| &**x == n);

        let mut nodes: Vec<usize> = (0..snap.nodes.len()).collect();
        nodes.sort_by(|&a, &b| snap.nodes[a].id.cmp(&snap.nodes[b].id));
        let mut cap = vec![Milli::ZERO; nodes.len() * r];
        for (i, &n) in nodes.iter().enumerate() {
            for (name, amount) in snap.nodes[n].capacity.iter() {
                if let Some(k) = index(&names, name) {
                    cap[i * r + k] = amount.max(Milli::ZERO);
                }
            }
        }
        // What others use is gone before any of our jobs is charged.
        let mut free = cap.clone();
        for (i, &n) in nodes.iter().enumerate() {
            for (name, amount) in snap.nodes[n].used_outside.iter() {
                if let Some(k) = index(&names, name) {
                    free[i * r + k] = free[i * r + k].minus(amount.max(Milli::ZERO)).max(Milli::ZERO);
                }
            }
        }
        let node_limit = nodes.iter().map(|&n| snap.limits.iter().position(|l| l.backend == snap.nodes[n].backend)).collect();
        let node_ids: HashMap<&str, usize> = nodes.iter().enumerate().map(|(i, &n)| (&*snap.nodes[n].id, i)).collect();

        let mut slot_base = Vec::with_capacity(c.queues.len());
        let (mut quota, mut lend, mut limit) = (Vec::new(), Vec::new(), Vec::new());
        for q in &c.queues {
            slot_base.push(quota.len() / r.max(1));
            for s in &q.slots {
                quota.extend_from_slice(&s.quota);
                // Names only jobs mention: unlimited in the catch-all default queue, and
                // uncovered (so never checked) anywhere else.
                quota.extend(std::iter::repeat_n(Milli::UNLIMITED, r - s.quota.len()));
                lend.extend_from_slice(&s.lend);
                lend.extend(std::iter::repeat_n(Milli::ZERO, r - s.lend.len()));
                limit.extend_from_slice(&s.borrow);
                limit.extend(std::iter::repeat_n(Milli::ZERO, r - s.borrow.len()));
            }
        }
        let usage = vec![Milli::ZERO; quota.len()];
        let pool_of = vec![NO_POOL; quota.len()];

        let mut rows = vec![Milli::ZERO; snap.pending.len() * r];
        let mut pending_bad = vec![None; snap.pending.len()];
        for (i, p) in snap.pending.iter().enumerate() {
            if p.request.is_empty() {
                pending_bad[i] = Some("must request at least one resource");
            }
            for (name, amount) in p.request.iter() {
                if amount < Milli::ZERO {
                    pending_bad[i] = Some("requests a negative amount");
                }
                if let Some(k) = find(&names, name) {
                    rows[i * r + k] = amount;
                }
            }
        }

        let mut st = State {
            snap,
            c,
            names,
            r,
            nodes,
            node_limit,
            in_flight: vec![0; snap.limits.len()],
            cap,
            free,
            slot_base,
            usage,
            quota,
            pool_of,
            lend,
            limit,
            pool_cap: Vec::new(),
            pool_used: Vec::new(),
            pools: Vec::new(),
            lendable: Vec::new(),
            sets: Vec::new(),
            set_ids: HashMap::new(),
            rows,
            pending_bad,
            runs: Vec::with_capacity(snap.running.len()),
            run_rows: vec![Milli::ZERO; snap.running.len() * r],
            charges: Vec::new(),
            victim_order: vec![Vec::new(); c.queues.len()],
            epoch: 0,
            epochs: 0,
        };
        for f in 0..c.flavors.len() {
            st.set_for(&[f]);
        }
        st.build_pools();
        st.charge_running(&node_ids);
        st
    }

    /// Charges every running job to its quota cells and its node.
    fn charge_running(&mut self, node_ids: &HashMap<&str, usize>) {
        let (c, r) = (self.c, self.r);
        for (i, j) in self.snap.running.iter().enumerate() {
            for (name, amount) in j.request.iter() {
                if let Some(k) = self.names.iter().position(|x| x == name) {
                    self.run_rows[i * r + k] = amount.max(Milli::ZERO);
                }
            }
            let queue = c.queue_ids.get(&*j.queue).copied();
            let start = self.charges.len();
            if let Some(q) = queue {
                let def = &c.queues[q];
                for fa in &j.flavors {
                    let Some(slot) = def.slots.iter().position(|s| c.flavors[s.flavor].name == fa.flavor) else {
                        continue; // flavor gone from this queue since admission: nothing to charge
                    };
                    for name in &fa.resources {
                        if let Some(k) = self.names.iter().position(|x| x == name) {
                            let cell = self.cell(q, slot, k);
                            let amount = self.run_rows[i * r + k];
                            self.add_usage(cell, amount);
                            self.charges.push((cell, amount));
                        }
                    }
                }
            }
            let node = node_ids.get(&*j.node).copied();
            if let Some(n) = node {
                for k in 0..r {
                    self.free[n * r + k] = self.free[n * r + k].minus(self.run_rows[i * r + k]);
                }
                if let Some(l) = self.node_limit[n] {
                    self.in_flight[l] += 1;
                }
            }
            self.runs.push(Run { node, charges: start..self.charges.len(), victim: false });
            if let Some(q) = queue {
                self.victim_order[q].push(i);
            }
        }
        let running = self.snap.running;
        // Every queue's victims, peers' included (reclaim), in the same order.
        for order in &mut self.victim_order {
            order.sort_by(|&a, &b| {
                let (a, b) = (&running[a], &running[b]);
                a.priority
                    .cmp(&b.priority)
                    .then(b.started_at_ms.cmp(&a.started_at_ms))
                    .then(a.id.cmp(&b.id))
            });
        }
    }

    /// Index of a quota cell.
    pub fn cell(&self, q: usize, slot: usize, res: usize) -> usize {
        (self.slot_base[q] + slot) * self.r + res
    }

    /// The request row of pending job `j`.
    pub fn row(&self, j: usize) -> &[Milli] {
        &self.rows[j * self.r..(j + 1) * self.r]
    }

    /// The group of queue `q` covering resource `res`.
    pub fn covered(&self, q: usize, res: usize) -> Option<usize> {
        let def = &self.c.queues[q];
        match def.covered.get(res) {
            Some(g) => *g,
            None => def.covers_everything.then_some(0),
        }
    }

    /// The node set of a flavor tuple (sorted, deduplicated), built on first use.
    pub fn set_for(&mut self, flavors: &[usize]) -> usize {
        if let Some(&id) = self.set_ids.get(flavors) {
            return id;
        }
        let r = self.r;
        let mut nodes = Vec::new();
        let mut member = vec![false; self.nodes.len()];
        let mut cap_max = vec![Milli::ZERO; r];
        for (i, &n) in self.nodes.iter().enumerate() {
            let labels = &self.snap.nodes[n].labels;
            if flavors.iter().all(|&f| selector::matches(Some(&self.c.flavors[f].selector), labels)) {
                nodes.push(i);
                member[i] = true;
                for k in 0..r {
                    cap_max[k] = cap_max[k].max(self.cap[i * r + k]);
                }
            }
        }
        let id = self.sets.len();
        self.sets.push(NodeSet {
            flavors: flavors.to_vec(),
            nodes,
            member,
            bound: vec![Milli::UNLIMITED; r],
            cap_max,
            fails: Vec::new(),
            epoch: self.epoch,
        });
        self.set_ids.insert(flavors.into(), id);
        id
    }

    /// Whether node index `n` belongs to a backend with no run to spare under its cap: the
    /// limit's index if so.
    pub fn backend_full(&self, n: usize) -> Option<usize> {
        full_limit(self.node_limit[n], &self.in_flight, self.snap.limits)
    }

    /// Finds the node of `set` that fits `row` best by `score` (lower wins).
    pub fn place(&mut self, set: usize, row: &[Milli], score: fn(i64) -> i64) -> Result<usize, NoPlace> {
        let (r, epoch) = (self.r, self.epoch);
        let s = &mut self.sets[set];
        if s.epoch != epoch {
            s.bound.iter_mut().for_each(|b| *b = Milli::UNLIMITED);
            s.fails.clear();
            s.epoch = epoch;
        }
        if s.nodes.is_empty() || row.iter().zip(&s.bound).any(|(a, b)| a > b) {
            return Err(NoPlace::NoRoom);
        }
        if s.fails.iter().any(|f| f.iter().zip(row).all(|(f, a)| f <= a)) {
            return Err(NoPlace::NoRoom);
        }
        let mut best: Option<(i64, usize)> = None;
        // A node with room whose backend is at its cap: the job waits for the backend.
        let mut capped: Option<usize> = None;
        // The scan sees every node of the set, so it makes the bound exact again.
        s.bound.iter_mut().for_each(|b| *b = Milli::ZERO);
        let bound = &mut s.bound;
        for &n in &s.nodes {
            let free = &self.free[n * r..(n + 1) * r];
            let mut fits = true;
            for k in 0..r {
                bound[k] = bound[k].max(free[k]);
                fits &= free[k] >= row[k];
            }
            if !fits {
                continue;
            }
            if let Some(l) = full_limit(self.node_limit[n], &self.in_flight, self.snap.limits) {
                capped.get_or_insert(l);
                continue;
            }
            let cap = &self.cap[n * r..(n + 1) * r];
            let left: i64 = (0..r)
                .filter(|&k| cap[k] > Milli::ZERO)
                .map(|k| ((free[k].minus(row[k]).0 as i128 * 1_000_000) / cap[k].0 as i128) as i64)
                .fold(0, i64::saturating_add);
            let sc = score(left);
            if best.is_none_or(|(b, _)| sc < b) {
                best = Some((sc, n));
            }
        }
        match (best, capped) {
            (Some((_, n)), _) => Ok(n),
            // Not remembered as a failed shape: the backend frees a slot without a release
            // of capacity (its count, not its room, is what stops the job).
            (None, Some(limit)) => Err(NoPlace::InFlight { limit }),
            (None, None) => {
                if s.fails.len() == FAIL_MEMORY {
                    s.fails.remove(0);
                }
                s.fails.push(row.to_vec());
                Err(NoPlace::NoRoom)
            }
        }
    }

    /// Charges an admitted job: quota cells of its chosen slots and its node.
    pub fn charge(&mut self, q: usize, slots: &[(usize, usize)], row: &[Milli], node: usize) {
        let r = self.r;
        for k in 0..r {
            if row[k] == Milli::ZERO {
                continue;
            }
            if let Some(g) = self.covered(q, k) {
                if let Some(&(_, slot)) = slots.iter().find(|(gg, _)| *gg == g) {
                    let cell = self.cell(q, slot, k);
                    self.add_usage(cell, row[k]);
                }
            }
            self.free[node * r + k] = self.free[node * r + k].minus(row[k]);
        }
        if let Some(l) = self.node_limit[node] {
            self.in_flight[l] += 1;
        }
    }

    /// Releases a running job chosen as a victim.
    pub fn release(&mut self, run: usize) {
        self.set_victim(run, true);
    }

    /// Undoes [`State::release`] (only if a simulated preemption turns out not to place).
    pub fn restore(&mut self, run: usize) {
        self.set_victim(run, false);
    }

    /// Moves a running job's charges out of (victim) or back into (not) quota usage and its
    /// node's free capacity; release and restore are the same walk in opposite directions.
    fn set_victim(&mut self, run: usize, victim: bool) {
        type Op = fn(Milli, Milli) -> Milli;
        let to_free: Op = if victim { Milli::plus } else { Milli::minus };
        let r = self.r;
        for i in self.runs[run].charges.clone() {
            let (cell, amount) = self.charges[i];
            self.add_usage(cell, if victim { Milli(amount.0.saturating_neg()) } else { amount });
        }
        if let Some(n) = self.runs[run].node {
            for k in 0..r {
                self.free[n * r + k] = to_free(self.free[n * r + k], self.run_rows[run * r + k]);
            }
            if let Some(l) = self.node_limit[n] {
                self.in_flight[l] = if victim { self.in_flight[l] - 1 } else { self.in_flight[l] + 1 };
            }
        }
        self.runs[run].victim = victim;
        self.epochs += 1;
        self.epoch = self.epochs;
    }

    /// Runs a simulation that releases and restores victims (`f` must restore everything it
    /// released): caches built before it stay valid after it, so the epoch is put back.
    pub fn simulating<T>(&mut self, f: impl FnOnce(&mut State<'a>) -> T) -> T {
        let epoch = self.epoch;
        let out = f(self);
        self.epoch = epoch;
        out
    }
}
