//! The live jobs as a decision reads them: the pending ones of each queue in order (a
//! [`Lane`] each) and the ones holding quota. Kept as jobs change, so a quick cycle reads
//! each queue's first jobs and the holders instead of every live job.
//!
//! Every change to a live job is `touch`ed for the next commit; the loop hands the touched
//! jobs to [`Lanes::sync`] before each decision and at each commit, and the jobs it takes
//! in (submitted, loaded, recovered) as it inserts them. Debug builds check the lanes
//! against the jobs at every decision.

use engine::quick::{Lane, Waiting as _};

use super::*;

#[derive(Debug, Default)]
pub(super) struct Lanes {
    queues: HashMap<Name, Lane>,
    /// Where each pending job is filed: its queue, rank and request then.
    filed: HashMap<Name, (Name, FifoRank, Resources)>,
    /// Jobs holding quota (admitted or running).
    holding: HashSet<Name>,
}

impl Lanes {
    /// Files `key` as `live` is now (`None`: gone from memory).
    pub(super) fn sync(&mut self, key: &Name, live: Option<&Live>) {
        if let Some((queue, rank, request)) = self.filed.remove(key) {
            if let Some(lane) = self.queues.get_mut(&queue) {
                lane.remove(rank, key, &request);
                if lane.is_empty() {
                    self.queues.remove(&queue);
                }
            }
        }
        self.holding.remove(key);
        let Some(l) = live else { return };
        if l.row.state == JobState::Pending {
            let rank = l.rank();
            self.queues.entry(l.queue.clone()).or_default().insert(rank, l.key.clone(), &l.request);
            self.filed.insert(l.key.clone(), (l.queue.clone(), rank, l.request.clone()));
        } else if l.row.state.holds_quota() {
            self.holding.insert(l.key.clone());
        }
    }

    /// Each queue's pending jobs.
    pub(super) fn queues(&self) -> impl Iterator<Item = (&Name, &Lane)> {
        self.queues.iter()
    }

    /// The jobs holding quota.
    pub(super) fn holding(&self) -> impl Iterator<Item = &Name> {
        self.holding.iter()
    }

    /// Panics unless the lanes file exactly the pending jobs of `jobs` as they are now, and
    /// hold exactly its quota holders (debug builds, at every decision).
    #[cfg(any(debug_assertions, test))]
    pub(super) fn check(&self, jobs: &HashMap<Name, Live>) {
        let mut pending = 0;
        for (key, l) in jobs {
            match l.row.state {
                JobState::Pending => {
                    pending += 1;
                    let filed = self.filed.get(key).unwrap_or_else(|| panic!("pending job {key} is in no lane"));
                    assert!(filed.0 == l.queue && filed.1 == l.rank() && filed.2 == l.request, "job {key} is filed as it was, not as it is");
                }
                s => assert_eq!(s.holds_quota(), self.holding.contains(key), "job {key} ({s}) is (not) listed as holding quota"),
            }
        }
        assert_eq!(pending, self.filed.len(), "the lanes file jobs that are not pending");
        assert_eq!(pending, self.queues.values().map(Lane::len).sum::<usize>(), "the lanes and what they file differ");
        assert!(self.holding.iter().all(|k| jobs.contains_key(k)), "a job gone from memory is listed as holding quota");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live_job(id: &str, queue: &str, priority: i64) -> Live {
        let mut row = JobRow::submitted(id.into(), id.into(), "ann".into(), Default::default(), priority, 1, 1_000);
        row.queue = Some(queue.into());
        let compiled = engine::compile(&Default::default()).expect("the empty config compiles");
        Live::from_row(row, &compiled)
    }

    #[test]
    fn a_job_is_filed_where_it_is_now() {
        let mut lanes = Lanes::default();
        let mut a = live_job("a", "team-a", 1);
        lanes.sync(&a.key, Some(&a));
        let mut jobs = HashMap::from([(a.key.clone(), a.clone())]);
        lanes.check(&jobs);
        // Its priority changes: filed again under its new rank.
        a.row.priority = 5;
        lanes.sync(&a.key, Some(&a));
        jobs.insert(a.key.clone(), a.clone());
        lanes.check(&jobs);
        // Admitted: it holds quota and leaves its lane.
        a.row.state = JobState::Admitted;
        lanes.sync(&a.key, Some(&a));
        jobs.insert(a.key.clone(), a.clone());
        lanes.check(&jobs);
        assert_eq!(lanes.queues().count(), 0);
        assert_eq!(lanes.holding().count(), 1);
        // Gone from memory.
        lanes.sync(&a.key, None);
        jobs.clear();
        lanes.check(&jobs);
        assert_eq!(lanes.holding().count(), 0);
    }
}
