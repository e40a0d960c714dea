//! Named, pluggable policies: how a queue orders equal-priority jobs and picks a node.
//!
//! Each policy is a plain function in a registry looked up by the name written in the config
//! (`ordering_policy`, `placement_policy`, `queueing_strategy`), so adding one is adding a
//! row. The registries' names must stay equal to the model's `ORDERING_POLICIES` etc. (a test
//! checks), because validation in the browser uses those lists.

use super::resources::Milli;

/// Resource indices every compiled config interns first (see `compile`).
pub(crate) const CPU: usize = 0;
pub(crate) const GPU: usize = 1;
pub(crate) const MEMORY: usize = 2;

/// Sort key contributed by an ordering policy; compared after priority, before enqueue time.
pub type OrderKey = [i64; 4];

/// An ordering policy: maps a job's dense request row to a key (smaller goes first).
#[derive(Debug)]
pub struct OrderingPolicy {
    /// The name used in config.
    pub name: &'static str,
    /// Key of one request (amounts indexed by interned resource).
    pub key: fn(&[Milli]) -> OrderKey,
}

/// "How big is a request": GPUs first (the scarce resource), then CPUs, then memory, then
/// the sum of custom resources. Ensemble Launcher's large_resource ranks by GPUs and nodes
/// the same way; a lexicographic key needs no normalisation between units.
fn size(row: &[Milli]) -> OrderKey {
    let at = |i: usize| row.get(i).map_or(0, |m| m.0);
    let custom = row.iter().skip(3).fold(0i64, |s, m| s.saturating_add(m.0));
    [at(GPU), at(CPU), at(MEMORY), custom]
}

fn fifo(_: &[Milli]) -> OrderKey {
    [0; 4]
}

fn large_resource(row: &[Milli]) -> OrderKey {
    size(row).map(|v| v.saturating_neg())
}

fn small_first(row: &[Milli]) -> OrderKey {
    size(row)
}

/// Ordering policies by name; the first is the default.
pub static ORDERING: &[OrderingPolicy] = &[
    OrderingPolicy { name: "fifo", key: fifo },
    OrderingPolicy { name: "large_resource", key: large_resource },
    OrderingPolicy { name: "small_first", key: small_first },
];

/// A placement policy: scores a node that fits (lower wins; ties go to the node id first in
/// order). The input is the sum over the node's resources of the fraction left free after
/// placing the job, in millionths.
#[derive(Debug)]
pub struct PlacementPolicy {
    /// The name used in config.
    pub name: &'static str,
    /// Score of a fitting node from its free fraction after placement.
    pub score: fn(i64) -> i64,
}

/// Best fit: the node left fullest, so big holes stay open for big jobs.
fn bin_packing(free_after: i64) -> i64 {
    free_after
}

/// Least loaded: the node left emptiest, so load spreads out.
fn spread(free_after: i64) -> i64 {
    free_after.saturating_neg()
}

/// Placement policies by name; the first is the default.
pub static PLACEMENT: &[PlacementPolicy] = &[
    PlacementPolicy { name: "bin_packing", score: bin_packing },
    PlacementPolicy { name: "spread", score: spread },
];

/// Whether a job that does not fit blocks the jobs behind it in its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueingStrategy {
    /// A job that does not fit is skipped; smaller ones behind it may be admitted (default).
    BestEffortFifo,
    /// The head of the queue blocks it until it is admitted.
    StrictFifo,
}

/// Queueing strategies by name; the first is the default.
pub static QUEUEING: &[(&str, QueueingStrategy)] = &[
    ("best_effort_fifo", QueueingStrategy::BestEffortFifo),
    ("strict_fifo", QueueingStrategy::StrictFifo),
];

/// Looks an ordering policy up by name (`None` = default).
pub fn ordering(name: Option<&str>) -> Option<&'static OrderingPolicy> {
    let name = name.unwrap_or(ORDERING[0].name);
    ORDERING.iter().find(|p| p.name == name)
}

/// Looks a placement policy up by name (`None` = default).
pub fn placement(name: Option<&str>) -> Option<&'static PlacementPolicy> {
    let name = name.unwrap_or(PLACEMENT[0].name);
    PLACEMENT.iter().find(|p| p.name == name)
}

/// Looks a queueing strategy up by name (`None` = default).
pub fn queueing(name: Option<&str>) -> Option<QueueingStrategy> {
    let name = name.unwrap_or(QUEUEING[0].0);
    QUEUEING.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use app::config::{ORDERING_POLICIES, PLACEMENT_POLICIES, QUEUEING_STRATEGIES};

    #[test]
    fn registries_match_the_names_validation_accepts() {
        let names: Vec<_> = ORDERING.iter().map(|p| p.name).collect();
        assert_eq!(names, ORDERING_POLICIES);
        let names: Vec<_> = PLACEMENT.iter().map(|p| p.name).collect();
        assert_eq!(names, PLACEMENT_POLICIES);
        let names: Vec<_> = QUEUEING.iter().map(|p| p.0).collect();
        assert_eq!(names, QUEUEING_STRATEGIES);
    }

    #[test]
    fn size_ranks_gpus_then_cpus_then_memory() {
        let row = |c: i64, g: i64, m: i64| [Milli(c), Milli(g), Milli(m)];
        assert!(small_first(&row(64, 0, 512)) < small_first(&row(1, 1, 1)));
        assert!(large_resource(&row(1, 1, 1)) < large_resource(&row(64, 0, 512)));
        assert!(small_first(&row(2, 1, 0)) < small_first(&row(4, 1, 0)));
        assert_eq!(fifo(&row(9, 9, 9)), fifo(&row(0, 0, 0)));
    }
}
