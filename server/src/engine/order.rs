//! Step 2 of a cycle: the order jobs are considered in.
//!
//! Within a queue the order is total: priority (higher first), then the queue's ordering
//! policy key, then enqueue time, then job id (then input position, only for duplicate ids).
//! Across queues — which compete for nodes, not quota — the queues' heads are interleaved by
//! priority, then enqueue time, then job id, then queue, the way Kueue takes one head per
//! queue per cycle and sorts the heads. Same snapshot, same order, whatever the input order.
//!
//! Two passes, as Kueue admits the heads that need no borrowing before those that do: in
//! the first, a queue of a cohort whose job would have to borrow (or preempt) is *deferred*
//! from that job on; the second pass offers the deferred jobs in the same order — or, in a
//! cohort with fair sharing, the queue of lowest weighted share first (`cohort.rs`).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use super::state::State;

/// A queue's head in the merge: (fair share, −priority, enqueue time, id, queue).
type Head<'a> = Reverse<(i64, i64, i64, &'a str, usize)>;

/// Heads of every queue, merged.
pub(crate) struct Order<'a> {
    per_queue: Vec<Vec<usize>>,
    next: Vec<usize>,
    heap: BinaryHeap<Head<'a>>,
    /// Per queue: where its deferred jobs start (first pass), `None` if not deferred.
    deferred: Vec<Option<usize>>,
    /// In the second pass (borrowing).
    borrowing: bool,
    /// Pending jobs naming a queue the config does not have, by queue name, in fifo order.
    pub orphans: BTreeMap<&'a str, Vec<usize>>,
}

impl<'a> Order<'a> {
    /// Sorts each queue's pending jobs and seeds the merge with every queue's head.
    pub fn build(st: &State<'a>) -> Order<'a> {
        let pending = st.snap.pending;
        let mut per_queue: Vec<Vec<usize>> = vec![Vec::new(); st.c.queues.len()];
        let mut orphans: BTreeMap<&'a str, Vec<usize>> = BTreeMap::new();
        // The admission loop's jobs share their queue's name with the config, so most are
        // found by the name's address, without hashing or comparing its text.
        let by_address: HashMap<usize, usize> = st.c.queues.iter().enumerate().map(|(q, d)| (d.name.as_ptr() as usize, q)).collect();
        for (i, p) in pending.iter().enumerate() {
            match by_address.get(&(p.queue.as_ptr() as usize)).or_else(|| st.c.queue_ids.get(&*p.queue)).copied() {
                Some(q) => per_queue[q].push(i),
                None => orphans.entry(&*p.queue).or_default().push(i),
            }
        }
        for (q, jobs) in per_queue.iter_mut().enumerate() {
            let key = st.c.queues[q].ordering.key;
            let mut keyed: Vec<_> = jobs
                .iter()
                .map(|&i| ((Reverse(pending[i].priority), key(st.row(i)), pending[i].enqueued_at_ms), i))
                .collect();
            keyed.sort_unstable_by(|(ka, a), (kb, b)| {
                ka.cmp(kb).then_with(|| pending[*a].id.cmp(&pending[*b].id)).then(a.cmp(b))
            });
            jobs.clear();
            jobs.extend(keyed.into_iter().map(|(_, i)| i));
        }
        for jobs in orphans.values_mut() {
            jobs.sort_by(|&a, &b| {
                let (x, y) = (&pending[a], &pending[b]);
                (Reverse(x.priority), x.enqueued_at_ms, &x.id).cmp(&(Reverse(y.priority), y.enqueued_at_ms, &y.id))
            });
        }
        let n = per_queue.len();
        let mut order = Order { next: vec![0; n], per_queue, heap: BinaryHeap::new(), deferred: vec![None; n], borrowing: false, orphans };
        for q in 0..order.per_queue.len() {
            order.push_head(st, q);
        }
        order
    }

    fn push_head(&mut self, st: &State<'a>, q: usize) {
        if let Some(&j) = self.per_queue[q].get(self.next[q]) {
            let p = &st.snap.pending[j];
            let fair = self.borrowing && st.c.queues[q].cohort.is_some_and(|c| st.c.cohorts[c].fair);
            let share = if fair { st.share(q, st.row(j)) } else { 0 };
            self.heap.push(Reverse((share, p.priority.saturating_neg(), p.enqueued_at_ms, &*p.id, q)));
        }
    }

    /// The next (queue, pending job) to decide on.
    pub fn next_job(&mut self, st: &State<'a>) -> Option<(usize, usize)> {
        loop {
            let Reverse((_, _, _, _, q)) = self.heap.pop()?;
            if !self.borrowing && self.deferred[q].is_some() {
                continue; // its head was pushed before it was deferred
            }
            let j = self.per_queue[q][self.next[q]];
            self.next[q] += 1;
            self.push_head(st, q);
            return Some((q, j));
        }
    }

    /// Whether the second pass (borrowing) has started.
    pub fn borrowing(&self) -> bool {
        self.borrowing
    }

    /// Defers queue `q` to the second pass, from the job [`Order::next_job`] just gave.
    pub fn defer(&mut self, q: usize) {
        self.deferred[q].get_or_insert(self.next[q] - 1);
    }

    /// Starts the second pass: the deferred jobs of every queue, merged again.
    pub fn start_borrowing(&mut self, st: &State<'a>) {
        self.borrowing = true;
        self.heap.clear();
        for q in 0..self.per_queue.len() {
            if let Some(from) = self.deferred[q] {
                self.next[q] = from;
                self.push_head(st, q);
            }
        }
    }
}
