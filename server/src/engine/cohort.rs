//! Cohorts: queues that pool their unused nominal quota, in milli-units, per flavor and
//! resource — Kueue's model for a flat cohort (`pkg/cache/scheduler/resource_node.go`).
//!
//! A queue's cell (queue × flavor × resource) has a nominal quota `N`, a lending limit `L`
//! (all of `N` when omitted) and a borrowing limit `B` (none when omitted). Its *guaranteed*
//! part `G = N − L` never leaves it. The cohort's *pool* for one flavor and resource holds
//! what its members lend, `Σ L`, and counts as used what each member uses above its
//! guaranteed part, `Σ max(0, U − G)`. A member may take `max(0, G − U)` from its own
//! guaranteed part plus what the pool has idle, but never more from the pool than `L` plus
//! `B` in all (what it lends plus what it may borrow). It *borrows* what it uses above `N`.
//! An unlimited nominal lends without limit (or its `lending_limit`) and never borrows.

use std::cmp::Ordering;
use std::collections::HashMap;

use super::resources::Milli;
use super::state::{State, NO_POOL};

/// One cell's quota terms in its cohort.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Terms {
    pub nominal: Milli,
    pub lend: Milli,
    pub limit: Milli,
}

/// `a − b`, where an unlimited `a` stays unlimited.
fn sub(a: Milli, b: Milli) -> Milli {
    if a == Milli::UNLIMITED { a } else { a.minus(b) }
}

impl Terms {
    /// What never leaves the queue: `N − L` (unlimited when `N` is and `L` is not).
    pub fn guaranteed(self) -> Milli {
        match (self.nominal == Milli::UNLIMITED, self.lend == Milli::UNLIMITED) {
            (true, true) => Milli::ZERO,
            (true, false) => Milli::UNLIMITED,
            _ => self.nominal.minus(self.lend).max(Milli::ZERO),
        }
    }

    /// Usage counted in the pool: above the guaranteed part.
    pub fn in_pool(self, used: Milli) -> Milli {
        sub(used, self.guaranteed()).max(Milli::ZERO).min(used.max(Milli::ZERO))
    }

    /// Usage above the nominal quota.
    pub fn borrowed(self, used: Milli) -> Milli {
        if self.nominal == Milli::UNLIMITED { Milli::ZERO } else { used.minus(self.nominal).max(Milli::ZERO) }
    }

    /// How much more the queue may use now: its own idle guaranteed part plus what the pool
    /// has idle, capped by what it lends plus its borrowing limit.
    pub fn available(self, used: Milli, pool_cap: Milli, pool_used: Milli) -> Milli {
        let g = self.guaranteed();
        if g == Milli::UNLIMITED {
            return Milli::UNLIMITED;
        }
        let local = g.minus(used).max(Milli::ZERO);
        let mut pool = sub(pool_cap, pool_used);
        if self.limit != Milli::UNLIMITED {
            pool = pool.min(sub(self.lend, self.in_pool(used)).plus(self.limit));
        }
        local.plus(pool)
    }

    /// The most the queue could ever use: its guaranteed part plus the whole pool, capped by
    /// nominal plus borrowing limit.
    pub fn potential(self, pool_cap: Milli) -> Milli {
        self.guaranteed().plus(pool_cap).min(self.nominal.plus(self.limit))
    }
}

impl State<'_> {
    /// Builds the pools: one per cohort × flavor × resource some member covers.
    pub(crate) fn build_pools(&mut self) {
        let c = self.c;
        let mut ids: HashMap<(usize, usize, usize), u32> = HashMap::new();
        for (q, def) in c.queues.iter().enumerate() {
            let Some(cohort) = def.cohort else { continue };
            for (slot, s) in def.slots.iter().enumerate() {
                for &k in &def.groups[s.group].resources {
                    let p = *ids.entry((cohort, s.flavor, k)).or_insert_with(|| {
                        self.pools.push((cohort, s.flavor, k));
                        self.pool_cap.push(Milli::ZERO);
                        self.pool_used.push(Milli::ZERO);
                        (self.pools.len() - 1) as u32
                    });
                    let cell = self.cell(q, slot, k);
                    self.pool_of[cell] = p;
                    self.pool_cap[p as usize] = self.pool_cap[p as usize].plus(self.lend[cell]);
                }
            }
        }
        self.lendable = vec![Milli::ZERO; c.cohorts.len() * self.r];
        for (&(cohort, _, k), cap) in self.pools.iter().zip(&self.pool_cap) {
            let at = cohort * self.r + k;
            self.lendable[at] = self.lendable[at].plus(*cap);
        }
    }

    /// The terms of a cell.
    pub(crate) fn terms(&self, cell: usize) -> Terms {
        Terms { nominal: self.quota[cell], lend: self.lend[cell], limit: self.limit[cell] }
    }

    /// The pool of a cell, if its queue is in a cohort.
    pub(crate) fn pool(&self, cell: usize) -> Option<usize> {
        let p = self.pool_of[cell];
        (p != NO_POOL).then_some(p as usize)
    }

    /// Adds `amount` (negative to release) to a cell's usage, and the change above its
    /// guaranteed part to its pool.
    pub(crate) fn add_usage(&mut self, cell: usize, amount: Milli) {
        let before = self.usage[cell];
        let after = before.plus(amount);
        self.usage[cell] = after;
        if let Some(p) = self.pool(cell) {
            let t = self.terms(cell);
            self.pool_used[p] = self.pool_used[p].minus(t.in_pool(before)).plus(t.in_pool(after));
        }
    }

    /// How much more a cell may hold now (pool included).
    pub(crate) fn available(&self, cell: usize) -> Milli {
        match self.pool(cell) {
            Some(p) => self.terms(cell).available(self.usage[cell], self.pool_cap[p], self.pool_used[p]),
            None => sub(self.quota[cell], self.usage[cell]),
        }
    }

    /// Whether adding `a` takes the cell above its nominal quota.
    pub(crate) fn borrows_with(&self, cell: usize, a: Milli) -> bool {
        self.pool(cell).is_some() && self.quota[cell] != Milli::UNLIMITED && self.usage[cell].plus(a) > self.quota[cell]
    }

    /// Whether the cell's queue uses more than its nominal there.
    pub(crate) fn borrowing(&self, cell: usize) -> bool {
        self.borrows_with(cell, Milli::ZERO)
    }

    /// Who lends `amount` borrowed by queue `q` in `cell`'s pool: each peer's share in
    /// proportion to its idle lendable quota there (the remainder to the first), in config
    /// order; empty outside a cohort.
    pub(crate) fn lenders(&self, q: usize, cell: usize, amount: Milli) -> Vec<(super::resources::Name, Milli)> {
        let Some(p) = self.pool(cell) else { return Vec::new() };
        let (cohort, flavor, k) = self.pools[p];
        let mut idle: Vec<(usize, Milli)> = Vec::new();
        for &m in self.c.cohorts[cohort].members.iter().filter(|&&m| m != q) {
            let def = &self.c.queues[m];
            let Some(slot) = def.slots.iter().position(|s| s.flavor == flavor) else { continue };
            if def.covered.get(k).copied().flatten() != Some(def.slots[slot].group) {
                continue;
            }
            let c = self.cell(m, slot, k);
            let t = self.terms(c);
            let free = sub(t.lend, t.in_pool(self.usage[c]).min(t.lend)).max(Milli::ZERO);
            if free > Milli::ZERO {
                idle.push((m, free));
            }
        }
        let total = idle.iter().fold(Milli::ZERO, |s, (_, f)| s.plus(*f));
        if total == Milli::ZERO {
            return Vec::new();
        }
        let mut out: Vec<(super::resources::Name, Milli)> = idle
            .iter()
            .map(|&(m, free)| {
                let part = if total == Milli::UNLIMITED || free == Milli::UNLIMITED {
                    if free == Milli::UNLIMITED { amount } else { Milli::ZERO }
                } else {
                    Milli((i128::from(amount.0) * i128::from(free.0) / i128::from(total.0)) as i64)
                };
                (self.c.queues[m].name.clone(), part)
            })
            .collect();
        let given = out.iter().fold(Milli::ZERO, |s, (_, a)| s.plus(*a));
        // Rounding leaves at most a few thousandths: the first lender carries them.
        if let Some(first) = out.first_mut() {
            first.1 = first.1.plus(amount.minus(given).max(Milli::ZERO));
        }
        out.retain(|(_, a)| *a > Milli::ZERO);
        out
    }

    /// Whether queue `q` uses more than its nominal in any cell.
    pub(crate) fn queue_borrowing(&self, q: usize) -> bool {
        let def = &self.c.queues[q];
        def.cohort.is_some()
            && def.slots.iter().enumerate().any(|(slot, s)| {
                def.groups[s.group].resources.iter().any(|&k| self.borrowing(self.cell(q, slot, k)))
            })
    }

    /// The most a cell could ever hold, whatever its peers use.
    pub(crate) fn potential(&self, cell: usize) -> Milli {
        match self.pool(cell) {
            Some(p) => self.terms(cell).potential(self.pool_cap[p]),
            None => self.quota[cell],
        }
    }

    /// Kueue's weighted dominant resource share of queue `q` if it also held `row` under the
    /// first flavor of each group: per resource, what it would borrow over what its cohort
    /// can lend of that resource (all flavors), the largest, in thousandths, times 1000 over
    /// its weight. 0 when it borrows nothing; `i64::MAX` for a borrowing queue of weight 0.
    pub(crate) fn share(&self, q: usize, row: &[Milli]) -> i64 {
        let def = &self.c.queues[q];
        let Some(cohort) = def.cohort else { return 0 };
        let mut dominant: i64 = 0;
        for k in 0..self.r {
            let mut borrowed = Milli::ZERO;
            for (slot, s) in def.slots.iter().enumerate() {
                if def.covered.get(k).copied().flatten() != Some(s.group) {
                    continue;
                }
                let cell = self.cell(q, slot, k);
                let first = def.groups[s.group].slots.start == slot;
                let extra = if first { row.get(k).copied().unwrap_or_default() } else { Milli::ZERO };
                borrowed = borrowed.plus(self.terms(cell).borrowed(self.usage[cell].plus(extra)));
            }
            if borrowed == Milli::ZERO {
                continue;
            }
            let lendable = self.lendable[cohort * self.r + k];
            let ratio = if lendable > Milli::ZERO { (i128::from(borrowed.0) * 1000 / i128::from(lendable.0)) as i64 } else { 0 };
            dominant = dominant.max(ratio);
        }
        match dominant.cmp(&0) {
            Ordering::Equal => 0,
            _ if def.weight == Milli::ZERO => i64::MAX,
            _ => (i128::from(dominant) * 1_000_000 / i128::from(def.weight.0)).min(i128::from(i64::MAX - 1)) as i64,
        }
    }
}

/// What one quota cell of a cohort member borrows from its cohort and lends to it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CellShare {
    /// Usage above the nominal quota.
    pub borrowed: Milli,
    /// The part of the cohort's borrowing this cell's idle lendable quota carries: the
    /// cohort's borrowed total (per flavor and resource) split among its members in
    /// proportion to what each has idle and lendable.
    pub lent: Milli,
}

/// [`CellShare`] of every cell, given each cell's usage (same order); zero outside cohorts.
pub fn cohort_shares(cells: &[super::QuotaCell], used: &[Milli]) -> Vec<CellShare> {
    let terms = |c: &super::QuotaCell| Terms {
        nominal: c.nominal.unwrap_or(Milli::UNLIMITED),
        lend: c.lendable.unwrap_or(Milli::UNLIMITED),
        limit: c.borrowing_limit.unwrap_or(Milli::UNLIMITED),
    };
    let mut out = vec![CellShare::default(); cells.len()];
    // Per pool: the members' cells, what they borrow and what they have idle to lend.
    let mut pools: HashMap<(&str, &str, &str), Vec<usize>> = HashMap::new();
    for (i, c) in cells.iter().enumerate() {
        if let Some(cohort) = &c.cohort {
            pools.entry((cohort, &c.flavor, &c.resource)).or_default().push(i);
            out[i].borrowed = terms(c).borrowed(used.get(i).copied().unwrap_or_default());
        }
    }
    for members in pools.values() {
        let borrowed = members.iter().fold(Milli::ZERO, |s, &i| s.plus(out[i].borrowed));
        let idle: Vec<Milli> = members
            .iter()
            .map(|&i| {
                let t = terms(&cells[i]);
                let in_pool = t.in_pool(used.get(i).copied().unwrap_or_default());
                sub(t.lend, in_pool.min(t.lend)).max(Milli::ZERO)
            })
            .collect();
        let unlimited = idle.iter().filter(|m| **m == Milli::UNLIMITED).count();
        let total = idle.iter().fold(Milli::ZERO, |s, m| s.plus(*m));
        for (&i, &mine) in members.iter().zip(&idle) {
            out[i].lent = match (unlimited, total > Milli::ZERO) {
                (0, true) => Milli((i128::from(borrowed.0) * i128::from(mine.0) / i128::from(total.0)) as i64),
                (0, false) => Milli::ZERO,
                (n, _) if mine == Milli::UNLIMITED => Milli(borrowed.0 / n as i64),
                _ => Milli::ZERO,
            };
        }
    }
    out
}

/// Kueue's dominant resource share of a cohort member, from its cells' shares: per
/// resource, what it borrows over what the cohort lends of it (all flavors), the largest,
/// in thousandths; weighted by `1000 / weight`. `None` when it borrows nothing.
pub fn dominant_share(cells: &[super::QuotaCell], shares: &[CellShare], queue: &str, weight: Milli) -> Option<i64> {
    let cohort = cells.iter().find(|c| &*c.queue == queue)?.cohort.clone()?;
    let mut borrowed: HashMap<&str, Milli> = HashMap::new();
    let mut lendable: HashMap<&str, Milli> = HashMap::new();
    for (c, s) in cells.iter().zip(shares) {
        if c.cohort.as_deref() != Some(&*cohort) {
            continue;
        }
        let l = lendable.entry(&c.resource).or_default();
        *l = l.plus(c.lendable.unwrap_or(Milli::UNLIMITED));
        if &*c.queue == queue {
            let b = borrowed.entry(&c.resource).or_default();
            *b = b.plus(s.borrowed);
        }
    }
    let dominant = borrowed
        .iter()
        .filter(|(_, b)| **b > Milli::ZERO)
        .filter_map(|(r, b)| {
            let l = lendable.get(r).copied().unwrap_or_default();
            (l > Milli::ZERO).then(|| (i128::from(b.0) * 1000 / i128::from(l.0)) as i64)
        })
        .max()?;
    Some(if weight == Milli::ZERO { i64::MAX } else { (i128::from(dominant) * 1000 / i128::from(weight.0)) as i64 })
}
