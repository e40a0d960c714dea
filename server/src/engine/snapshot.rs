//! The engine's input: everything one admission cycle decides on, `now` included.
//!
//! The runtime builds a [`Snapshot`] from its store and the backends' node lists; the engine
//! only reads it. Names are [`Name`]s (`Arc<str>`) so the runtime can share one allocation per
//! queue or node across thousands of jobs.

use app::config::Labels;

use super::compile::Compiled;
use super::resources::{Name, Resources};

/// One admission cycle's view of the world.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot<'a> {
    /// The runtime's clock at snapshot time, in milliseconds; echoed into the plan.
    pub now_ms: i64,
    /// The active config.
    pub config: &'a Compiled,
    /// Every node every backend reported.
    pub nodes: &'a [Node],
    /// Admitted and running jobs: both hold quota and node capacity.
    pub running: &'a [RunningJob],
    /// Jobs waiting for admission.
    pub pending: &'a [PendingJob],
    /// Backends that cap how many of their runs may be in flight at once; a backend not
    /// listed is bounded only by its nodes' capacity.
    pub limits: &'a [InFlightLimit],
}

/// A backend's cap on runs holding capacity at once (admitted or running), counted over the
/// running jobs on its nodes and the admissions of the cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InFlightLimit {
    /// The backend (as in [`Node::backend`]).
    pub backend: Name,
    /// At most this many runs at once.
    pub max_in_flight: usize,
}

/// A machine a backend can run jobs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Unique node id (also the tie-breaker of placement).
    pub id: Name,
    /// Backend that owns the node (`local`, `ray`, …); copied into admissions.
    pub backend: Name,
    /// Labels flavor selectors match against.
    pub labels: Labels,
    /// Total capacity; resources the node does not list have capacity 0.
    pub capacity: Resources,
    /// Capacity in use by work this scheduler did not start (another user's jobs on a shared
    /// Ray cluster), as its backend last saw it: free capacity starts from `capacity` minus
    /// this. Only admission looks at it; what a node could ever hold is `capacity`.
    pub used_outside: Resources,
}

/// Which flavor a job's resources (of one resource group) were admitted under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlavorAssignment {
    /// The flavor.
    pub flavor: Name,
    /// The job's requested resources charged to that flavor, in the group's order.
    pub resources: Vec<Name>,
}

/// A stored admission's flavor, as the engine counts it (the loop and the preview both read
/// stored jobs this way).
impl From<&app::jobs::FlavorUse> for FlavorAssignment {
    fn from(f: &app::jobs::FlavorUse) -> Self {
        FlavorAssignment { flavor: f.flavor.as_str().into(), resources: f.resources.iter().map(|r| r.as_str().into()).collect() }
    }
}

/// A job holding quota and capacity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningJob {
    /// Job id.
    pub id: Name,
    /// Queue it was admitted to (charged there).
    pub queue: Name,
    /// Its priority (preemption compares it).
    pub priority: i64,
    /// What it holds.
    pub request: Resources,
    /// Flavors it was admitted under, as the [`Admission`](super::Admission) said.
    pub flavors: Vec<FlavorAssignment>,
    /// Node it runs on.
    pub node: Name,
    /// When it was admitted; the most recently started lower-priority job is preempted first.
    pub started_at_ms: i64,
}

/// A job waiting to be admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingJob {
    /// Job id.
    pub id: Name,
    /// Queue it was routed to.
    pub queue: Name,
    /// Priority after the rule's priority policy.
    pub priority: i64,
    /// What it asks for.
    pub request: Resources,
    /// When it was first enqueued (kept across preemptions).
    pub enqueued_at_ms: i64,
}
