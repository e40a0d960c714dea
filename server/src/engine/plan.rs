//! The engine's output: what to do this cycle, and why the rest waits.
//!
//! A plan is data; the runtime's applier performs it in one transaction: stop every victim,
//! requeue it (keeping its enqueue time), then start the admissions, then record events.

use std::sync::Arc;

use super::resources::Name;
use super::snapshot::FlavorAssignment;

/// The decisions of one admission cycle.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The snapshot's `now_ms`, so events can carry the decision time.
    pub now_ms: i64,
    /// Jobs to start, in decision order (preemptors included).
    pub admissions: Vec<Admission>,
    /// Victims to stop before any admission starts, grouped by the job they make room for.
    pub preemptions: Vec<Preemption>,
    /// Every pending job not admitted, ordered by queue name then position.
    pub pending: Vec<PendingInfo>,
}

/// Start this job there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// Job id.
    pub job: Name,
    /// Its queue (charged there).
    pub queue: Name,
    /// One entry per resource group the request touches, in group order.
    pub flavors: Vec<FlavorAssignment>,
    /// Node chosen by the queue's placement policy.
    pub node: Name,
    /// The node's backend.
    pub backend: Name,
    /// What it borrows from its queue's cohort: usage above nominal this admission adds.
    pub borrowed: Vec<Borrowed>,
}

/// An amount an admission borrows from its queue's cohort.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Borrowed {
    /// The cohort lending it.
    pub cohort: Name,
    pub flavor: Name,
    pub resource: Name,
    pub amount: super::resources::Milli,
    /// Who lends it: the peers whose idle lendable quota it takes, in proportion to what each
    /// had idle (config order).
    pub lenders: Vec<(Name, super::resources::Milli)>,
}

/// Stop these jobs so `preemptor` fits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preemption {
    /// The job admitted in their place (it is also in `admissions`).
    pub preemptor: Name,
    /// Its queue.
    pub queue: Name,
    /// Running jobs to stop and requeue, in the order they were chosen.
    pub victims: Vec<Victim>,
}

/// One running job a preemption stops, and why it may.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Victim {
    /// Job id.
    pub job: Name,
    /// Its queue: the preemptor's, or (reclaim, borrow) a cohort peer that borrows.
    pub queue: Name,
    pub cause: Cause,
}

/// Why a victim may be preempted (Kueue's `InClusterQueue`, `InCohortReclamation`,
/// `InCohortReclaimWhileBorrowing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cause {
    /// A lower-priority job of the preemptor's own queue (`within_resource_queue`).
    WithinQueue,
    /// The preemptor's queue takes back quota a borrowing peer uses (`reclaim_within_cohort`).
    Reclaim,
    /// The preemptor borrows the quota a lower-priority borrowing peer uses
    /// (`borrow_within_cohort`).
    Borrow,
}

impl Cause {
    /// As written in events and the API: `within_queue`, `reclaim`, `borrow`.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::WithinQueue => "within_queue",
            Cause::Reclaim => "reclaim",
            Cause::Borrow => "borrow",
        }
    }
}

/// Why a pending job waits, and where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingInfo {
    /// Job id.
    pub job: Name,
    /// Its queue.
    pub queue: Name,
    /// 1-based rank among its queue's waiting jobs in admission order.
    pub position: usize,
    /// One sentence per flavor tried, shown verbatim by the dashboard. Shared between jobs
    /// that wait for the very same reason.
    pub reason: Arc<str>,
    /// The reason in one line for people: `Waiting for CPU: 2 of 2 in use in vision;
    /// nothing of lower priority to preempt` (see `explain::headline`).
    pub headline: Arc<str>,
    /// It was tried after the cycle's last preemption and nothing fit (after preemption,
    /// where its queue preempts), or its strict_fifo queue is blocked by such a job. Fitting
    /// only gets harder from then on, so a job of the same queue considered later, asking at
    /// least as much of every resource at no higher priority, would not fit either.
    pub no_room: bool,
}

impl Plan {
    /// The admission of one job, if any.
    pub fn admission(&self, job: &str) -> Option<&Admission> {
        self.admissions.iter().find(|a| &*a.job == job)
    }

    /// The pending entry of one job, if any.
    pub fn pending_info(&self, job: &str) -> Option<&PendingInfo> {
        self.pending.iter().find(|p| &*p.job == job)
    }

    /// All victims of this plan (job ids).
    pub fn victims(&self) -> impl Iterator<Item = &Name> + '_ {
        self.preemptions.iter().flat_map(|p| p.victims.iter().map(|v| &v.job))
    }
}

/// What allows preempting a candidate (Kueue's preemption variants).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A lower-priority job of the preemptor's queue.
    Own,
    /// A borrowing peer's job; the preemptor's queue stays within nominal.
    Reclaim,
    /// A borrowing peer's job; only if the preemptor then borrows nothing.
    ReclaimWithoutBorrowing,
    /// A lower-priority borrowing peer's job, while the preemptor borrows.
    Borrow,
}

impl Kind {
    pub(crate) fn cause(self) -> Cause {
        match self {
            Kind::Own => Cause::WithinQueue,
            Kind::Reclaim | Kind::ReclaimWithoutBorrowing => Cause::Reclaim,
            Kind::Borrow => Cause::Borrow,
        }
    }
}
