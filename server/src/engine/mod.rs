//! The admission engine: a pure, deterministic function from a snapshot to a plan.
//!
//! No clock, no I/O, no threads, no randomness: the runtime loop, the what-if replay and the
//! dashboard all call the same functions and get the same answers. Semantics follow
//! PRODUCT.md §2–§3; the decisions this module had to make are stated here, once.
//!
//! # Interface
//!
//! ```text
//! compile(&SchedulerConfig) -> Result<Compiled, CompileError>
//! route(&Compiled, &Labels, requested_priority: Option<i64>) -> Result<Routed, Rejection>
//! check_submittable(&Compiled, &[Node], queue: &str, &Resources) -> Result<(), Rejection>
//! schedule(&Snapshot) -> Plan
//! sim::run(&Compiled, &[Node], &[sim::Arrival], &sim::Options) -> sim::Report
//! ```
//!
//! * [`compile`] resolves names to indices, converts quotas to fixed-point [`Milli`]
//!   (thousandths, `i64`, no float drift) and picks policies by name from registries
//!   ([`policy`]). A config that passed validation always compiles; one that did not yields
//!   a [`CompileError`] with a path, never a panic (a property test holds the two to that:
//!   `tests/compile.rs`). With no scheduling rules, every job goes to the built-in `default`
//!   queue: the config's own queue of that name if it has one, else one compile adds, with
//!   unlimited quota for every resource under a flavor `default` (the config's flavor of
//!   that name, or one matching every node). With rules but no queues, rules may name that
//!   built-in queue.
//! * [`route`]: rules in order, first match wins, a rule without selector catches the rest;
//!   selectors are Kubernetes label selectors (`not_in` matches a job *without* the key).
//!   No rule matching: rejected, naming the labels. Priority: requested, else the rule's
//!   `default`, else 0 (clamped into the bounds — a missing priority is never a violation).
//!   Outside `[min, max]`: rejected naming the bound when `on_violation` is `reject` *or
//!   omitted*; clamped with `force_update`.
//! * [`check_submittable`] rejects at submit: no resources at all ("must request at least
//!   one resource", seed 001); negative amounts; a resource no resource group of the queue
//!   covers (Kueue's choice: it could never be charged, so it would wait forever); a request
//!   no single node matching the queue's flavors could ever hold, naming the biggest node.
//!   A request above quota is not rejected (quotas change on apply); it waits with a reason.
//! * [`schedule`] runs one cycle (`cycle.rs`): snapshot → order → assign flavors → pick
//!   victims → plan.
//!
//! # Semantics of a cycle
//!
//! * **Resources.** `cpu`, `gpu`, `memory_gb` and any custom name, amounts in milli-units.
//!   A zero amount is the same as not asking. A node lacking a resource has 0 of it.
//! * **Quota** is per queue × flavor × resource and held by running *and* admitted jobs
//!   (both are in [`Snapshot::running`]). Omitted `nominal_quota`, or a covered resource the
//!   flavor does not list, is unlimited; `0` blocks. A queue outside a cohort is limited to
//!   its nominal quota.
//! * **Cohorts** (`cohort.rs`): queues sharing a `cohort_name` pool their unused nominal
//!   quota per flavor and resource, as Kueue does for a flat cohort. A member may use its
//!   guaranteed part (`nominal − lending_limit`) plus what the pool has idle, but never more
//!   than `nominal + borrowing_limit`; it borrows what it uses above nominal. Jobs that fit
//!   without borrowing are decided first, then the borrowers (`order.rs`); among a cohort's
//!   borrowers, fair sharing (a member sets `fair_sharing_weight`) takes the queue of lowest
//!   weighted dominant share first. A tuple of flavors that needs no borrowing is preferred
//!   to an earlier one that must borrow (Kueue's `whenCanBorrow: TryNextFlavor`; Kueue's
//!   default stops at the first tuple that fits, borrowing or not).
//! * **Order** within a queue is total: priority, the queue's `ordering_policy` key
//!   (`fifo` default; `large_resource`, `small_first` rank by GPUs, then CPUs, then memory,
//!   then custom resources), enqueue time, id. Queues' heads are interleaved by priority,
//!   then enqueue time, then id, because queues compete for nodes.
//! * **One job, one node.** For every resource group the request touches, one flavor is
//!   chosen; flavor tuples are tried in preference order (first group's preference
//!   dominates). A tuple fits when quota holds every requested resource AND one node matches
//!   *every* chosen flavor's selector and has free room for the *whole* request. The queue's
//!   `placement_policy` chooses among fitting nodes: `bin_packing` (default) leaves the node
//!   fullest, `spread` emptiest, measured as the sum over the node's resources of the free
//!   fraction after placement; ties go to the smallest node id.
//! * **Head-of-line.** `best_effort_fifo` (default): a job that does not fit does not block
//!   those behind it. `strict_fifo`: the first job that does not fit (after trying
//!   preemption) blocks the rest of its queue this cycle, and their reason says so. A job
//!   that can never be admitted (uncovered resource, empty request) does not block.
//! * **Preemption** only when nothing fits without it, within the queue for
//!   `within_resource_queue: lower_priority`, and of borrowing cohort peers' jobs for
//!   `reclaim_within_cohort` (`lower_priority` or `any`) and `borrow_within_cohort`: see
//!   `preempt.rs`. `never` or omitted never preempts. The preemptor is admitted *in the same
//!   plan*, with its victims' quota and node capacity released in the cycle's working copy;
//!   the applier must stop every victim before starting any admission. Every victim carries
//!   its [`Cause`]; a victim of the own queue is of strictly lower priority, one of a peer
//!   belongs to a queue that borrows; none is chosen twice or admitted in the same cycle.
//! * **Explanations.** Every pending job not admitted gets a position (1-based, per queue,
//!   in admission order) and a reason with one sentence per flavor tried, plus why
//!   preemption did not help; see `explain.rs`.
//!
//! # Cost
//!
//! The hot path works on interned indices and flat `Vec<Milli>` tables and reuses scratch
//! buffers; "cannot fit" is cheap: per node set, an upper bound of free capacity and a
//! memory of request shapes that found no room (both valid until something is released),
//! per queue the last reason (reused verbatim for the next identical request), and per
//! queue failed preemption attempts. `server/benches/engine.rs` measures it.

mod assign;
mod cohort;
mod compile;
mod cycle;
mod explain;
mod order;
mod plan;
pub mod policy;
mod preempt;
pub mod quick;
mod resources;
mod route;
pub mod sim;
mod snapshot;
mod state;

#[cfg(test)]
pub(crate) mod tests;

pub use cohort::{cohort_shares, dominant_share, CellShare};
pub use compile::{compile, CompileError, Compiled, QuotaCell, DEFAULT_QUEUE};
pub use cycle::schedule;
pub use plan::{Admission, Borrowed, Cause, PendingInfo, Plan, Preemption, Victim};
pub use resources::{Milli, Name, Resources};
pub use route::{bounded_priority, check_submittable, nodes_that_hold, route, Rejection, Routed};
pub use snapshot::{FlavorAssignment, InFlightLimit, Node, PendingJob, RunningJob, Snapshot};

pub use app::config::Labels;
