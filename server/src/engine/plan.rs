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
}

/// Stop these jobs so `preemptor` fits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preemption {
    /// The job admitted in their place (it is also in `admissions`).
    pub preemptor: Name,
    /// Its queue (victims are always from the same queue).
    pub queue: Name,
    /// Running jobs to stop and requeue, in the order they were chosen.
    pub victims: Vec<Name>,
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
    /// It was tried and nothing fit (after preemption, where its queue preempts), or its
    /// strict_fifo queue is blocked by such a job. Fitting only gets harder as a cycle goes
    /// on (when it preempts no one), so a job of the same queue considered later, asking at
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

    /// All victims of this plan.
    pub fn victims(&self) -> impl Iterator<Item = &Name> + '_ {
        self.preemptions.iter().flat_map(|p| p.victims.iter())
    }
}
