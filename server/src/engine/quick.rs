//! Quick cycles: deciding on the first jobs of each long fifo queue only, when that gives
//! the same admissions and preemptions as offering every job.
//!
//! A cycle is ordered: a job is decided after every job ahead of it in its queue, and after
//! the cycle's last preemption room only shrinks (a preemption releases its victims, which
//! can make room for jobs decided after it). So a job left out cannot fit when an offered
//! job of its queue, ahead of it and decided after the last preemption, found no room and
//! asked for no more of any resource than it does; in a strict_fifo queue, when any such
//! offered job found no room (the queue stops there). Nor can it preempt: that job could
//! not, with at least the candidates it would have. Jobs that cannot fit change nothing for
//! the jobs after them. When that holds for every job left out, the quick plan is the plan
//! of the whole snapshot but for the positions and reasons of the jobs left out.
//!
//! A queue's first jobs are often all of one kind (the large ones, of higher priority), and
//! the smaller jobs behind them are covered by no miss among them. So a best_effort queue
//! also offers the first job of each other request behind its first ones: its miss covers
//! the jobs asking the same, which it is ahead of. Its position in the quick plan leaves
//! out the jobs ahead of it, as positions of quick plans always may.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::ops::Bound;

use super::compile::Compiled;
use super::plan::Plan;
use super::policy::QueueingStrategy;
use super::resources::{Name, Resources};
use super::snapshot::PendingJob;

/// A waiting job as a quick cycle sorts it: the admission loop's own jobs and the engine's
/// [`PendingJob`] both are.
pub trait Waiting {
    fn id(&self) -> &str;
    fn queue(&self) -> &Name;
    fn request(&self) -> &Resources;
    /// Its place in a fifo queue (see [`fifo_rank`]).
    fn rank(&self) -> FifoRank;
}

impl Waiting for PendingJob {
    fn id(&self) -> &str {
        &self.id
    }
    fn queue(&self) -> &Name {
        &self.queue
    }
    fn request(&self) -> &Resources {
        &self.request
    }
    fn rank(&self) -> FifoRank {
        fifo_rank(self.priority, self.enqueued_at_ms, &self.id)
    }
}

/// What a quick cycle offers: every job of short or non-fifo queues, and the first `k` of
/// each longer fifo queue with (best_effort) the first job of each other request behind
/// them; and the cuts for [`exact`].
#[derive(Debug)]
pub struct QuickOffer<'a, T> {
    pub offered: Vec<&'a T>,
    pub cuts: Vec<Cut<'a>>,
}

/// Splits `jobs` for a quick cycle keeping the first `k` jobs of each fifo queue longer
/// than that: the jobs are put in [`Lane`]s and each is [`cut`], as the admission loop
/// does with the lanes it keeps.
pub fn offer<'a, T: Waiting>(config: &Compiled, jobs: impl IntoIterator<Item = &'a T>, k: usize) -> QuickOffer<'a, T> {
    offer_open(config, jobs, k, |_| true)
}

/// [`offer`] when only the jobs `open` accepts may be offered now (the others wait for
/// something else, as held jobs do, and are neither offered nor left out).
pub fn offer_open<'a, T: Waiting>(config: &Compiled, jobs: impl IntoIterator<Item = &'a T>, k: usize, open: impl Fn(&T) -> bool) -> QuickOffer<'a, T> {
    let mut by_id: HashMap<&str, &'a T> = HashMap::new();
    let mut lanes: Vec<(&Name, Lane)> = Vec::new();
    for job in jobs {
        by_id.insert(job.id(), job);
        let at = match lanes.iter().position(|(q, _)| *q == job.queue()) {
            Some(at) => at,
            None => {
                lanes.push((job.queue(), Lane::default()));
                lanes.len() - 1
            }
        };
        lanes[at].1.insert(job.rank(), Name::from(job.id()), job.request());
    }
    let find = |id: &Name| by_id.get(&**id).copied();
    let mut out = QuickOffer { offered: Vec::new(), cuts: Vec::new() };
    for (queue, lane) in &lanes {
        let Some(strategy) = config.fifo_strategy(queue) else {
            out.offered.extend(lane.iter().filter_map(find).filter(|j| open(j)));
            continue;
        };
        let c = cut(lane, strategy, k, find, &open);
        out.offered.extend(c.offered);
        out.cuts.extend(c.cut);
    }
    out
}

/// One queue's waiting jobs in [`fifo_rank`] order, and by request: the admission loop keeps
/// one per queue as jobs come and go, so a quick cycle reads a queue's first jobs instead of
/// sorting all of them.
#[derive(Debug, Default, Clone)]
pub struct Lane {
    order: BTreeSet<(FifoRank, Name)>,
    /// Each distinct request, with its jobs in order.
    shapes: Vec<(Resources, BTreeSet<(FifoRank, Name)>)>,
}

impl Lane {
    pub fn insert(&mut self, rank: FifoRank, id: Name, request: &Resources) {
        match self.shapes.iter_mut().find(|(r, _)| r == request) {
            Some((_, jobs)) => {
                jobs.insert((rank, id.clone()));
            }
            None => self.shapes.push((request.clone(), BTreeSet::from([(rank, id.clone())]))),
        }
        self.order.insert((rank, id));
    }

    pub fn remove(&mut self, rank: FifoRank, id: &Name, request: &Resources) {
        let key = (rank, id.clone());
        self.order.remove(&key);
        if let Some(at) = self.shapes.iter().position(|(r, _)| r == request) {
            self.shapes[at].1.remove(&key);
            if self.shapes[at].1.is_empty() {
                self.shapes.swap_remove(at);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The jobs in order.
    pub fn iter(&self) -> impl Iterator<Item = &Name> {
        self.order.iter().map(|(_, id)| id)
    }
}

/// A lane read for a quick cycle (see [`cut`]).
#[derive(Debug)]
pub struct LaneCut<'a, T> {
    /// The jobs to offer.
    pub offered: Vec<&'a T>,
    /// Jobs walked past that `open` refused (they wait for something else).
    pub refused: Vec<&'a T>,
    /// The cut for [`exact`] when jobs are left out.
    pub cut: Option<Cut<'a>>,
}

/// Reads a fifo queue's lane for a quick cycle: its first `k` jobs that `open` accepts and
/// (best_effort) the first job `open` accepts of each other request behind them, and the
/// [`Cut`] for [`exact`]. The jobs left out are not looked at: each
/// request among them counts in [`Cut::rest`] whether `open` would accept its jobs or not
/// (which can only make [`exact`] stricter). A lane of `k` open jobs or fewer, or of more
/// distinct requests than are told apart, is read whole.
pub fn cut<'l, 'a, T: Waiting + 'a>(
    lane: &'l Lane,
    strategy: QueueingStrategy,
    k: usize,
    job: impl Fn(&Name) -> Option<&'a T>,
    mut open: impl FnMut(&'a T) -> bool,
) -> LaneCut<'a, T> {
    let mut out = LaneCut { offered: Vec::new(), refused: Vec::new(), cut: None };
    let mut walk = lane.order.iter();
    let whole = lane.shapes.len() > SHAPES;
    let mut after = None;
    for key in walk.by_ref() {
        let Some(j) = job(&key.1) else { continue };
        if !open(j) {
            out.refused.push(j);
            continue;
        }
        out.offered.push(j);
        if !whole && out.offered.len() == k {
            after = Some(key);
            break;
        }
    }
    let Some(after) = after.filter(|_| walk.next().is_some()) else {
        return out; // read whole
    };
    let head: Vec<(&'a str, &'a Resources)> = out.offered.iter().map(|j| (j.id(), j.request())).collect();
    let strict = strategy == QueueingStrategy::StrictFifo;
    let mut firsts: Vec<(&'a str, &'a Resources)> = Vec::new();
    let mut rest: Vec<Resources> = Vec::new();
    for (request, jobs) in &lane.shapes {
        let mut tail = jobs.range((Bound::Excluded(after), Bound::Unbounded));
        if strict || firsts.len() == FIRSTS {
            if tail.next().is_some() {
                rest.push(request.clone());
            }
            continue;
        }
        let mut passed = false;
        let mut first = None;
        for key in tail.by_ref() {
            match job(&key.1) {
                Some(j) if open(j) => {
                    first = Some(j);
                    break;
                }
                _ => passed = true,
            }
        }
        let more = passed || tail.next().is_some();
        if let Some(j) = first {
            out.offered.push(j);
            firsts.push((j.id(), j.request()));
        }
        if more {
            rest.push(request.clone());
        }
    }
    out.cut = Some(Cut { strict, offered: head, firsts, rest });
    out
}

/// Most distinct requests of a queue's left-out jobs whose first job is offered too.
const FIRSTS: usize = 8;

/// Most distinct requests a lane may hold and still be cut: past that, it is read whole.
const SHAPES: usize = 64;

/// One queue's jobs split for a quick cycle.
#[derive(Debug)]
pub struct Cut<'a> {
    /// The queue is strict_fifo.
    pub strict: bool,
    /// Ids and requests of the jobs offered: the queue's first ones in [`fifo_rank`] order.
    pub offered: Vec<(&'a str, &'a Resources)>,
    /// Ids and requests of the other jobs offered (best_effort queues only): of the jobs
    /// behind the first ones, the first of each distinct request.
    pub firsts: Vec<(&'a str, &'a Resources)>,
    /// Requests of the jobs left out, all behind the offered ones, each once.
    pub rest: Vec<Resources>,
}

/// A pending job's place in a queue whose ordering policy is fifo (smaller goes first), as
/// the cycle orders it: priority, then enqueue time in milliseconds, then id, of which the
/// rank holds the first 16 bytes (a few machine words to compare): jobs of equal rank are
/// ordered by their whole ids.
pub type FifoRank = (Reverse<i64>, i64, u128);

pub fn fifo_rank(priority: i64, enqueued_at_ms: i64, id: &str) -> FifoRank {
    let mut head = [0u8; 16];
    let n = id.len().min(16);
    head[..n].copy_from_slice(&id.as_bytes()[..n]);
    (Reverse(priority), enqueued_at_ms, u128::from_be_bytes(head))
}

/// Whether `plan`, made with only the offered jobs of each cut, is exact (see the module doc).
pub fn exact(cuts: &[Cut], plan: &Plan) -> bool {
    let no_room: HashSet<&str> = plan.pending.iter().filter(|p| p.no_room).map(|p| &*p.job).collect();
    cuts.iter().all(|c| {
        let mut missed: Vec<&Resources> = Vec::new();
        for (_, request) in c.offered.iter().filter(|(id, _)| no_room.contains(id)) {
            if !missed.contains(request) {
                missed.push(request);
            }
        }
        if c.strict {
            return !missed.is_empty();
        }
        // A first of its request is ahead only of the jobs asking the same.
        let missed_firsts: Vec<&Resources> = c.firsts.iter().filter(|(id, _)| no_room.contains(id)).map(|(_, r)| *r).collect();
        c.rest.iter().all(|r| missed.iter().any(|m| r.covers(m)) || missed_firsts.contains(&r))
    })
}
