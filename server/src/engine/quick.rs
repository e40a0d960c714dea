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
use std::collections::HashSet;
use std::sync::Arc;

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
/// them; the cuts for [`exact`]; and the jobs left out.
#[derive(Debug)]
pub struct QuickOffer<'a, T> {
    pub offered: Vec<&'a T>,
    pub cuts: Vec<Cut<'a>>,
    pub left_out: Vec<&'a T>,
}

/// Splits `jobs` for a quick cycle keeping the first `k` jobs of each fifo queue longer
/// than that (the admission loop's offer, and what the property test checks).
pub fn offer<'a, T: Waiting>(config: &Compiled, jobs: impl IntoIterator<Item = &'a T>, k: usize) -> QuickOffer<'a, T> {
    // Keyed once, so choosing a queue's first jobs compares a few words per job; jobs
    // usually share their queue's allocation, so queues are found by address first.
    let mut by_queue: Vec<(&Name, Vec<(FifoRank, &T)>)> = Vec::new();
    for job in jobs {
        let keyed = (job.rank(), job);
        match by_queue.iter_mut().find(|(q, _)| Arc::ptr_eq(q, job.queue()) || *q == job.queue()) {
            Some((_, list)) => list.push(keyed),
            None => by_queue.push((job.queue(), vec![keyed])),
        }
    }
    let mut out = QuickOffer { offered: Vec::new(), cuts: Vec::new(), left_out: Vec::new() };
    for (queue, mut list) in by_queue {
        match config.fifo_strategy(queue) {
            Some(strategy) if list.len() > k => {
                list.select_nth_unstable_by(k, |(a, ja), (b, jb)| a.cmp(b).then_with(|| ja.id().cmp(jb.id())));
                let (head, tail) = list.split_at(k);
                let strict = strategy == QueueingStrategy::StrictFifo;
                let shapes = Shapes::of(tail, if strict { 0 } else { FIRSTS });
                out.offered.extend(head.iter().map(|(_, j)| *j).chain(shapes.firsts.iter().map(|&i| tail[i].1)));
                out.left_out.extend(tail.iter().enumerate().filter(|(i, _)| !shapes.firsts.contains(i)).map(|(_, (_, j))| *j));
                out.cuts.push(Cut {
                    strict,
                    offered: head.iter().map(|(_, j)| (j.id(), j.request())).collect(),
                    firsts: shapes.firsts.iter().map(|&i| (tail[i].1.id(), tail[i].1.request())).collect(),
                    rest: shapes.rest,
                });
            }
            _ => out.offered.extend(list.into_iter().map(|(_, j)| j)),
        }
    }
    out
}

/// Most distinct requests of a queue's left-out jobs whose first job is offered too.
const FIRSTS: usize = 8;

/// Most distinct requests told apart among a queue's left-out jobs: past that, each job's
/// request is kept as it is (a longer [`Cut::rest`], never a wrong one).
const SHAPES: usize = 64;

/// The jobs behind a queue's first ones, by request.
struct Shapes<'a> {
    /// Where in the tail the first job (in [`fifo_rank`] order) of each of the first
    /// `firsts` distinct requests is: when such a job finds no room, so would every job
    /// behind it asking the same, whatever its place among the other requests.
    firsts: Vec<usize>,
    /// The requests of the other jobs, each once (up to [`SHAPES`] of them).
    rest: Vec<&'a Resources>,
}

impl<'a> Shapes<'a> {
    fn of<T: Waiting>(tail: &[(FifoRank, &'a T)], firsts: usize) -> Shapes<'a> {
        let before = |a: &(FifoRank, &T), b: &(FifoRank, &T)| a.0.cmp(&b.0).then_with(|| a.1.id().cmp(b.1.id())).is_lt();
        // Each distinct request: its first job in the tail, and whether another job asks it.
        let mut seen: Vec<(&Resources, usize, bool)> = Vec::new();
        let mut beyond: Vec<&Resources> = Vec::new();
        for (i, job) in tail.iter().enumerate() {
            let request = job.1.request();
            match seen.iter().position(|(r, ..)| *r == request) {
                Some(at) => {
                    let (_, first, more) = &mut seen[at];
                    *more = true;
                    if before(job, &tail[*first]) {
                        *first = i;
                    }
                }
                None if seen.len() < SHAPES => seen.push((request, i, false)),
                None => beyond.push(request),
            }
        }
        let mut shapes = Shapes { firsts: Vec::new(), rest: beyond };
        for (n, (request, first, more)) in seen.into_iter().enumerate() {
            if n < firsts {
                shapes.firsts.push(first);
                if !more {
                    continue;
                }
            }
            shapes.rest.push(request);
        }
        shapes
    }
}

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
    /// Requests of the jobs left out, all behind the offered ones (each request once, as
    /// [`offer`] makes them).
    pub rest: Vec<&'a Resources>,
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
        c.rest.iter().all(|r| missed.iter().any(|m| r.covers(m)) || missed_firsts.contains(r))
    })
}
