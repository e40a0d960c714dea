//! Submit time: which queue and priority a job gets, and whether it could ever run.
//!
//! Routing walks the scheduling rules in order and the first whose selector matches the
//! job's labels wins (selector semantics are Kubernetes': `not_in` matches a job that lacks
//! the key, see `app::config::selector`). A rule without selector matches everything not
//! matched earlier. With no rules at all, everything goes to the `default` queue.

use app::config::{selector, Labels, OnViolation};

use super::compile::{Compiled, RuleDef};
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

/// A job refused at submit, with the reason shown to its submitter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Rejection {
    /// What kind of refusal, in a few snake_case words (a metric's label: one of a fixed set).
    pub code: &'static str,
    /// One human sentence.
    pub reason: String,
}

fn reject(code: &'static str, reason: impl Into<String>) -> Rejection {
    Rejection { code, reason: reason.into() }
}

/// Routes a job by its labels and applies the matching rule's priority policy.
///
/// Priority: the requested one, else the rule's `default`, else 0. A requested (or default)
/// priority outside `[min, max]` is rejected with the bound in the reason when
/// `on_violation` is `reject` — also when `on_violation` is omitted — and clamped to the
/// bound with `force_update`. A job that gave no priority is never rejected for it: with no
/// default, 0 is clamped into the bounds.
pub fn route(c: &Compiled, labels: &Labels, requested_priority: Option<i64>) -> Result<Routed, Rejection> {
    if c.rules.is_empty() {
        // compile() always sets default_queue when there are no rules.
        let q = c.default_queue.and_then(|q| c.queues.get(q)).ok_or_else(|| reject("no_queue", "no queue to route to"))?;
        return Ok(Routed { queue: q.name.clone(), rule_index: None, priority: requested_priority.unwrap_or(0) });
    }
    let (index, rule) = c
        .rules
        .iter()
        .enumerate()
        .find(|(_, r)| selector::matches(r.selector.as_deref(), labels))
        .ok_or_else(|| reject("no_rule_matches", format!("no scheduling rule matches labels {}", describe_labels(labels))))?;
    let queue = c.queues[rule.queue].name.clone();
    let priority = bounded(rule, index, &queue, requested_priority.or(rule.default))?;
    Ok(Routed { queue, rule_index: Some(index), priority })
}

/// A priority under rule `index`'s policy: `None` (none asked, no default) is 0 clamped
/// into the bounds; one outside `[min, max]` is clamped with `force_update` and rejected,
/// naming the bound, with `reject` or no `on_violation`.
fn bounded(rule: &RuleDef, index: usize, queue: &str, priority: Option<i64>) -> Result<i64, Rejection> {
    let clamp = |p: i64| p.max(rule.min.unwrap_or(i64::MIN)).min(rule.max.unwrap_or(i64::MAX));
    let Some(p) = priority else { return Ok(clamp(0)) };
    let violated = match (rule.min, rule.max) {
        (Some(min), _) if p < min => Some(format!("below the minimum {min}")),
        (_, Some(max)) if p > max => Some(format!("above the maximum {max}")),
        _ => None,
    };
    match (violated, rule.on_violation) {
        (None, _) => Ok(p),
        (Some(_), OnViolation::ForceUpdate) => Ok(clamp(p)),
        (Some(why), OnViolation::Reject) => Err(reject("priority_out_of_range", format!("priority {p} is {why} allowed by scheduling_rules[{index}] (queue {queue})"))),
    }
}

/// The priority a routed job may be changed to, under the rule that routed it (the same
/// policy as at submit); a job no rule routed takes any priority.
pub fn bounded_priority(c: &Compiled, rule_index: Option<i64>, priority: i64) -> Result<i64, Rejection> {
    let Some((index, rule)) = rule_index.and_then(|i| usize::try_from(i).ok()).and_then(|i| Some((i, c.rules.get(i)?))) else {
        return Ok(priority);
    };
    bounded(rule, index, &c.queues[rule.queue].name, Some(priority))
}

/// `team=vision, tier=prod`, or `(none)`.
fn describe_labels(labels: &Labels) -> String {
    if labels.is_empty() {
        return "(none)".into();
    }
    labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")
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
