//! Quick cycles: deciding on the first jobs of each long fifo queue only, when that gives
//! the same admissions and preemptions as offering every job.
//!
//! A cycle is ordered: a job is decided after every job ahead of it in its queue, and while
//! no one is preempted, room only shrinks as the cycle goes on. So a job left out cannot fit
//! when an offered job of its queue, ahead of it, found no room and asked for no more of any
//! resource than it does; in a strict_fifo queue, when any offered job found no room (the
//! queue stops there). Jobs that cannot fit change nothing for the jobs after them. When
//! that holds for every job left out, and the quick plan preempts no one, it is the plan of
//! the whole snapshot but for the positions and reasons of the jobs left out.

use std::cmp::Reverse;
use std::collections::HashSet;

use super::plan::Plan;
use super::resources::Resources;

/// One queue's jobs split for a quick cycle.
#[derive(Debug)]
pub struct Cut<'a> {
    /// The queue is strict_fifo.
    pub strict: bool,
    /// Ids and requests of the jobs offered: the queue's first ones in [`fifo_rank`] order.
    pub offered: Vec<(&'a str, &'a Resources)>,
    /// Requests of the jobs left out, all behind the offered ones.
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
    if !plan.preemptions.is_empty() {
        return false;
    }
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
        c.rest.iter().all(|r| missed.iter().any(|m| r.covers(m)))
    })
}
