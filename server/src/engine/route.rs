//! Submit time: which queue and priority a job gets, and whether it could ever run.
//!
//! Routing itself (rules in order, first match wins, the priority policy) is
//! `app::config::route`, shared with the browser's submit form; this wraps it for the
//! engine's compiled config and adds what needs the nodes.

use app::config::route::reject;
pub use app::config::route::Rejection;
use app::config::{selector, Labels};

use super::compile::Compiled;
use super::resources::{Milli, Name, Resources};
use super::snapshot::Node;

/// Where a job goes and with which priority.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    /// The queue.
    pub queue: Name,
    /// Index of the matching rule in `scheduling_rules`; `None` when routed to the built-in
    /// default because there are no rules.
    pub rule_index: Option<usize>,
    /// Effective priority.
    pub priority: i64,
}

/// Routes a job by its labels and applies the matching rule's priority policy, with the
/// routing code the browser runs too (see [`app::config::Routing::route`] for the rules).
pub fn route(c: &Compiled, labels: &Labels, requested_priority: Option<i64>) -> Result<Routed, Rejection> {
    let r = c.routing.route(labels, requested_priority)?;
    Ok(Routed { queue: r.queue.into(), rule_index: r.rule_index, priority: r.priority })
}

/// The priority a routed job may be changed to, under the rule that routed it (the same
/// policy as at submit); a job no rule routed takes any priority.
pub fn bounded_priority(c: &Compiled, rule_index: Option<i64>, priority: i64) -> Result<i64, Rejection> {
    c.routing.bounded_priority(rule_index, priority)
}

/// Refuses at submit a request that could never be admitted to `queue` on these nodes.
///
/// Rejected: no resources at all (seed 001: "must request at least one resource"); a
/// negative amount; a resource no resource group of the queue covers (as Kueue does — a
/// job cannot be charged to a quota that does not exist, so it would wait forever); and a
/// request bigger than the total capacity of every node matching the queue's flavors (the
/// reason names the biggest such node and its numbers). A request above the queue's quota
/// is *not* rejected: quotas change with config applies, so it waits with a reason.
pub fn check_submittable(c: &Compiled, nodes: &[Node], queue: &str, request: &Resources) -> Result<(), Rejection> {
    nodes_that_hold(c, nodes, queue, request).map(|_| ())
}

/// The nodes that could ever hold `request` in `queue` (matching one flavor of each resource
/// group it touches, with the capacity); the rejection of [`check_submittable`] when none.
pub fn nodes_that_hold<'a>(c: &Compiled, nodes: &'a [Node], queue: &str, request: &Resources) -> Result<Vec<&'a Node>, Rejection> {
    if request.is_empty() {
        return Err(reject("no_resources", "must request at least one resource"));
    }
    if let Some((name, amount)) = request.iter().find(|(_, a)| *a < Milli::ZERO) {
        return Err(reject("negative_request", format!("requested {name} must not be negative (got {amount})")));
    }
    let q = c.queue_ids.get(queue).map(|&q| &c.queues[q]).ok_or_else(|| reject("unknown_queue", format!("queue {queue} is not defined")))?;
    let mut groups: Vec<usize> = Vec::new();
    let mut uncovered: Vec<&str> = Vec::new();
    for (name, _) in request.iter() {
        match c.group_of(q, name) {
            Some(g) if !groups.contains(&g) => groups.push(g),
            Some(_) => {}
            None => uncovered.push(name),
        }
    }
    if !uncovered.is_empty() {
        return Err(reject("resource_not_covered", format!(
            "queue {} has no resource group covering {}",
            q.name,
            uncovered.join(", ")
        )));
    }
    // The job runs on one node, which must match one flavor of every group it touches.
    let eligible = |n: &Node| {
        groups.iter().all(|&g| {
            q.slots[q.groups[g].slots.clone()]
                .iter()
                .any(|s| selector::matches(Some(&c.flavors[s.flavor].selector), &n.labels))
        })
    };
    let holds = |n: &Node| request.iter().all(|(r, a)| n.capacity.get(r) >= a);
    let holding: Vec<&Node> = nodes.iter().filter(|n| eligible(n) && holds(n)).collect();
    if !holding.is_empty() {
        return Ok(holding);
    }
    let mut biggest: Option<(&Node, i64)> = None;
    for n in nodes.iter().filter(|n| eligible(n)) {
        // How much of the request the node could hold, in millionths per resource.
        let score = request
            .iter()
            .map(|(r, a)| ((n.capacity.get(r).0 as i128 * 1_000_000) / a.0.max(1) as i128).min(1_000_000) as i64)
            .sum::<i64>();
        let better = match biggest {
            None => true,
            Some((b, s)) => score > s || (score == s && n.id < b.id),
        };
        if better {
            biggest = Some((n, score));
        }
    }
    let Some((big, _)) = biggest else {
        return Err(reject("no_matching_node", format!("no node matches the flavors of queue {}", q.name)));
    };
    let has: Vec<String> = request.iter().map(|(r, _)| format!("{r} {}", big.capacity.get(r))).collect();
    Err(reject("too_large", format!(
        "requests {request}, more than any node of queue {}'s flavors can hold; the biggest, {}, has {}",
        q.name,
        big.id,
        has.join(", ")
    )))
}

impl Compiled {
    /// The resource group of queue `q` covering resource `name`.
    pub(crate) fn group_of(&self, q: &super::compile::QueueDef, name: &str) -> Option<usize> {
        match self.resources.iter().position(|n| &**n == name) {
            Some(r) => q.covered[r],
            None => q.covers_everything.then_some(0),
        }
    }
}
