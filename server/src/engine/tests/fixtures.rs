//! Fixture builders: configs, nodes and jobs in one line each, and expected plan entries.
//!
//! Modeled on Kueue's `MakeClusterQueue("cq").ResourceGroup(...)` test wrappers so a table
//! case reads like the situation it describes.

use app::config::{
    FlavorQuota, MatchExpression, OnViolation, Operator, PriorityPolicy, ResourceFlavor, ResourceGroup, ResourceQueue, ResourceQuotaSpec, SchedulerConfig, SchedulingRule, WithinQueuePreemption,
};

use crate::engine::*;

pub use app::config::CohortPreemption;
pub use WithinQueuePreemption::{LowerPriority, Never};

/// `key in [values]`.
pub fn is_in(key: &str, values: &[&str]) -> MatchExpression {
    MatchExpression { key: key.into(), operator: Operator::In, values: Some(values.iter().map(|v| v.to_string()).collect()) }
}

/// Any operator.
pub fn expr(key: &str, operator: Operator, values: &[&str]) -> MatchExpression {
    let values = (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect());
    MatchExpression { key: key.into(), operator, values }
}

/// Config builder.
#[derive(Default)]
pub struct ConfigB(SchedulerConfig);

pub fn config() -> ConfigB {
    ConfigB(SchedulerConfig { resource_flavors: Some(vec![]), resource_queues: Some(vec![]), ..Default::default() })
}

impl ConfigB {
    /// A flavor selecting `market in [value]`-style labels, one pair per expression.
    pub fn flavor(self, name: &str, selector: &[(&str, &str)]) -> Self {
        self.flavor_expr(name, selector.iter().map(|(k, v)| is_in(k, &[v])).collect())
    }

    pub fn flavor_expr(mut self, name: &str, selector: Vec<MatchExpression>) -> Self {
        let selector = (!selector.is_empty()).then_some(selector);
        self.0.resource_flavors.get_or_insert_with(Vec::new).push(ResourceFlavor {
            name: name.into(),
            selector,
            advanced_instance_config: None,
        });
        self
    }

    pub fn queue(mut self, q: QueueB) -> Self {
        self.0.resource_queues.get_or_insert_with(Vec::new).push(q.0);
        self
    }

    pub fn rule(mut self, r: RuleB) -> Self {
        self.0.scheduling_rules.get_or_insert_with(Vec::new).push(r.0);
        self
    }

    pub fn build(self) -> SchedulerConfig {
        self.0
    }

    pub fn compile(self) -> Compiled {
        compile(&self.0).expect("fixture config compiles")
    }
}

/// Queue builder.
pub struct QueueB(ResourceQueue);

pub fn queue(name: &str) -> QueueB {
    QueueB(ResourceQueue { name: name.into(), resource_groups: Some(vec![]), ..Default::default() })
}

impl QueueB {
    pub fn preemption(mut self, p: WithinQueuePreemption) -> Self {
        self.0.preemption.get_or_insert_with(Default::default).within_resource_queue = Some(p);
        self
    }

    /// Joins cohort `name`.
    pub fn cohort(mut self, name: &str) -> Self {
        self.0.cohort_name = Some(name.into());
        self
    }

    pub fn reclaim(mut self, p: CohortPreemption) -> Self {
        self.0.preemption.get_or_insert_with(Default::default).reclaim_within_cohort = Some(p);
        self
    }

    pub fn borrow_within(mut self, p: CohortPreemption) -> Self {
        self.0.preemption.get_or_insert_with(Default::default).borrow_within_cohort = Some(p);
        self
    }

    pub fn weight(mut self, w: f64) -> Self {
        self.0.fair_sharing_weight = Some(w);
        self
    }

    /// Sets the lending and borrowing limits of `resource` under `flavor` (the quota must
    /// be listed already).
    pub fn limits(mut self, flavor: &str, resource: &str, lending: Option<f64>, borrowing: Option<f64>) -> Self {
        for g in self.0.resource_groups.iter_mut().flatten() {
            for fq in g.flavors.iter_mut().filter(|f| f.name == flavor) {
                for spec in fq.resources.iter_mut().flatten().filter(|r| r.name == resource) {
                    (spec.lending_limit, spec.borrowing_limit) = (lending, borrowing);
                }
            }
        }
        self
    }

    /// A resource group: covered resources, then flavors with whole-unit quotas. A covered
    /// resource a flavor does not list is unlimited.
    pub fn group(self, covered: &[&str], flavors: &[(&str, &[(&str, i64)])]) -> Self {
        let flavors: Vec<(&str, Vec<(&str, Option<f64>)>)> =
            flavors.iter().map(|(f, qs)| (*f, qs.iter().map(|(r, n)| (*r, Some(*n as f64))).collect())).collect();
        self.group_f(covered, &flavors)
    }

    /// A resource group with any quota numbers (`None` = omitted `nominal_quota`).
    pub fn group_f(mut self, covered: &[&str], flavors: &[(&str, Vec<(&str, Option<f64>)>)]) -> Self {
        self.0.resource_groups.get_or_insert_with(Vec::new).push(ResourceGroup {
            covered_resources: covered.iter().map(|c| c.to_string()).collect(),
            flavors: flavors
                .iter()
                .map(|(f, qs)| FlavorQuota {
                    name: f.to_string(),
                    resources: Some(
                        qs.iter()
                            .map(|(r, n)| ResourceQuotaSpec { name: r.to_string(), nominal_quota: *n, ..Default::default() })
                            .collect(),
                    ),
                })
                .collect(),
        });
        self
    }

    pub fn ordering(mut self, name: &str) -> Self {
        self.0.ordering_policy = Some(name.into());
        self
    }

    pub fn placement(mut self, name: &str) -> Self {
        self.0.placement_policy = Some(name.into());
        self
    }

    pub fn strict(mut self) -> Self {
        self.0.queueing_strategy = Some("strict_fifo".into());
        self
    }
}

/// Rule builder.
pub struct RuleB(SchedulingRule);

pub fn rule(queue: &str) -> RuleB {
    RuleB(SchedulingRule { resource_queue: queue.into(), selector: None, priority_policy: None })
}

impl RuleB {
    pub fn when(mut self, e: MatchExpression) -> Self {
        self.0.selector.get_or_insert_with(Vec::new).push(e);
        self
    }

    pub fn priority(mut self, default: Option<i64>, min: Option<i64>, max: Option<i64>, on: Option<OnViolation>) -> Self {
        self.0.priority_policy = Some(PriorityPolicy { default, min, max, on_violation: on });
        self
    }
}

/// Labels from pairs.
pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A node of backend `local` with no labels and no capacity yet.
pub fn node(id: &str) -> Node {
    Node { id: id.into(), backend: "local".into(), labels: Labels::new(), capacity: Resources::default(), used_outside: Resources::default() }
}

impl Node {
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.labels.insert(k.into(), v.into());
        self
    }

    pub fn cap(mut self, amounts: &[(&str, i64)]) -> Self {
        self.capacity = Resources::units(amounts);
        self
    }

    /// Capacity other schedulers' work takes on the node.
    pub fn outside(mut self, amounts: &[(&str, i64)]) -> Self {
        self.used_outside = Resources::units(amounts);
        self
    }

    pub fn backend(mut self, b: &str) -> Self {
        self.backend = b.into();
        self
    }
}

/// A pending job: priority 0, enqueued at 0, nothing requested yet.
pub fn pending(id: &str, queue: &str) -> PendingJob {
    PendingJob { id: id.into(), queue: queue.into(), priority: 0, request: Resources::default(), enqueued_at_ms: 0 }
}

impl PendingJob {
    pub fn prio(mut self, p: i64) -> Self {
        self.priority = p;
        self
    }

    pub fn req(mut self, amounts: &[(&str, i64)]) -> Self {
        self.request = Resources::units(amounts);
        self
    }

    pub fn req_milli(mut self, amounts: &[(&str, i64)]) -> Self {
        self.request = Resources::new(amounts.iter().map(|&(n, a)| (n, Milli(a))));
        self
    }

    pub fn at(mut self, t: i64) -> Self {
        self.enqueued_at_ms = t;
        self
    }
}

/// A running job: priority 0, started at 0.
pub fn running(id: &str, queue: &str) -> RunningJob {
    RunningJob {
        id: id.into(),
        queue: queue.into(),
        priority: 0,
        request: Resources::default(),
        flavors: vec![],
        node: "".into(),
        started_at_ms: 0,
    }
}

impl RunningJob {
    pub fn prio(mut self, p: i64) -> Self {
        self.priority = p;
        self
    }

    pub fn req(mut self, amounts: &[(&str, i64)]) -> Self {
        self.request = Resources::units(amounts);
        self
    }

    /// All requested resources under one flavor, on `node`.
    pub fn on(mut self, flavor: &str, node: &str) -> Self {
        let resources = self.request.iter().map(|(n, _)| n.clone()).collect();
        self.flavors = vec![FlavorAssignment { flavor: flavor.into(), resources }];
        self.node = node.into();
        self
    }

    pub fn started(mut self, t: i64) -> Self {
        self.started_at_ms = t;
        self
    }
}

/// Expected admission on a `local` node.
pub fn admit(job: &str, queue: &str, flavors: &[(&str, &[&str])], node: &str) -> Admission {
    Admission {
        job: job.into(),
        queue: queue.into(),
        flavors: flavors
            .iter()
            .map(|(f, rs)| FlavorAssignment { flavor: (*f).into(), resources: rs.iter().map(|&r| r.into()).collect() })
            .collect(),
        node: node.into(),
        backend: "local".into(),
        borrowed: vec![],
    }
}

impl Admission {
    /// Expects it to borrow `amount` of `resource` under `flavor` from `cohort`, lent by
    /// `lenders` (queue, amount).
    pub fn borrowing(mut self, cohort: &str, flavor: &str, resource: &str, amount: i64, lenders: &[(&str, i64)]) -> Self {
        self.borrowed.push(Borrowed {
            cohort: cohort.into(),
            flavor: flavor.into(),
            resource: resource.into(),
            amount: Milli::units(amount),
            lenders: lenders.iter().map(|&(q, a)| (q.into(), Milli::units(a))).collect(),
        });
        self
    }
}

/// Expected waiting entry ([`check`] leaves `no_room` and the headline out of the
/// comparison).
pub fn wait(job: &str, queue: &str, position: usize, reason: &str) -> PendingInfo {
    PendingInfo { job: job.into(), queue: queue.into(), position, reason: reason.into(), headline: "".into(), no_room: false }
}

/// Expected preemption within `queue`.
pub fn preempt(preemptor: &str, queue: &str, victims: &[&str]) -> Preemption {
    let victims = victims.iter().map(|&v| Victim { job: v.into(), queue: queue.into(), cause: Cause::WithinQueue }).collect();
    Preemption { preemptor: preemptor.into(), queue: queue.into(), victims }
}

/// Expected preemption of victims (job, their queue, cause) of any queue.
pub fn preempt_in(preemptor: &str, queue: &str, victims: &[(&str, &str, Cause)]) -> Preemption {
    let victims = victims.iter().map(|&(v, q, cause)| Victim { job: v.into(), queue: q.into(), cause }).collect();
    Preemption { preemptor: preemptor.into(), queue: queue.into(), victims }
}

/// Expected plan at `now_ms = 0`.
pub fn plan(admissions: Vec<Admission>, preemptions: Vec<Preemption>, pending: Vec<PendingInfo>) -> Plan {
    Plan { now_ms: 0, admissions, preemptions, pending }
}

/// One table row: a situation and the whole plan it must produce.
pub struct Case {
    pub name: &'static str,
    pub config: Compiled,
    pub nodes: Vec<Node>,
    pub running: Vec<RunningJob>,
    pub pending: Vec<PendingJob>,
    pub want: Plan,
}

/// Runs every case and compares whole plans, but for `no_room` (its own tests check it).
pub fn check(cases: Vec<Case>) {
    let mut failed = Vec::new();
    for c in &cases {
        let snap = Snapshot { now_ms: 0, config: &c.config, nodes: &c.nodes, running: &c.running, pending: &c.pending, limits: &[] };
        let mut got = schedule(&snap);
        got.pending.iter_mut().for_each(|p| {
            p.no_room = false;
            p.headline = "".into();
        });
        if got != c.want {
            failed.push(format!("case {:?}:\n  got:  {got:#?}\n  want: {:#?}", c.name, c.want));
        }
    }
    assert!(failed.is_empty(), "{} of {} cases failed:\n{}", failed.len(), cases.len(), failed.join("\n"));
}
