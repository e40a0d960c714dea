//! Compiling a raw [`SchedulerConfig`] into the engine's checked form.
//!
//! The raw config names things by string; the engine works on indices. Compiling resolves
//! every name once, turns quotas into fixed-point [`Milli`] tables (`UNLIMITED` for an omitted
//! `nominal_quota` or an unlisted resource, `0` = blocked) and picks policies from their
//! registries. Validation proper lives in `app`; this only refuses what the engine could not
//! run, with the same kind of path, and never panics.

use std::collections::HashMap;
use std::ops::Range;

use app::config::{CohortPreemption, MatchExpression, Operator, ResourceQueue, Routing, SchedulerConfig, WithinQueuePreemption};

use super::policy::{self, OrderingPolicy, PlacementPolicy, QueueingStrategy};
use super::resources::{Milli, Name};

/// Name of the queue (and, if the config has no flavor by that name, the flavor) compile adds
/// when the config has no scheduling rules, or rules but no queues.
pub const DEFAULT_QUEUE: &str = "default";

/// Why a config cannot be compiled: the first problem found, with its path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct CompileError {
    /// Where, e.g. `resource_queues[0].resource_groups[1].flavors[0].name`.
    pub path: String,
    /// What is wrong, for a person.
    pub message: String,
}

/// A config ready for the engine: names resolved to indices, quotas in milli-units.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// Interned resource names; `cpu`, `gpu`, `memory_gb` are always 0, 1, 2.
    pub(crate) resources: Vec<Name>,
    pub(crate) flavors: Vec<FlavorDef>,
    pub(crate) queues: Vec<QueueDef>,
    pub(crate) queue_ids: HashMap<Name, usize>,
    /// The scheduling rules, as the shared routing code (`app::config::route`) reads them.
    pub(crate) routing: Routing,
    /// Cohorts in order of first mention; queues name theirs by index.
    pub(crate) cohorts: Vec<CohortDef>,
}

/// Queues that pool their unused nominal quota.
#[derive(Debug, Clone)]
pub(crate) struct CohortDef {
    pub name: Name,
    /// Member queues, in config order.
    pub members: Vec<usize>,
    /// Some member set `fair_sharing_weight`: borrowers are ordered by weighted share.
    pub fair: bool,
}

/// Whom a queue's pending job may preempt on cohort peers that borrow
/// (`reclaim_within_cohort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reclaim {
    Never,
    LowerPriority,
    Any,
}

#[derive(Debug, Clone)]
pub(crate) struct FlavorDef {
    pub name: Name,
    pub selector: Vec<MatchExpression>,
    /// The selector as a person reads it: `market in [spot] and zone exists`.
    pub described: String,
}

#[derive(Debug, Clone)]
pub(crate) struct QueueDef {
    pub name: Name,
    pub preempt_lower_priority: bool,
    /// Its cohort (index into `Compiled::cohorts`).
    pub cohort: Option<usize>,
    pub reclaim: Reclaim,
    /// `borrow_within_cohort: lower_priority`: may preempt lower-priority borrowers of peers
    /// while borrowing itself.
    pub borrow_preempt: bool,
    /// Fair-sharing weight in milli-units (1000 when not set).
    pub weight: Milli,
    pub ordering: &'static OrderingPolicy,
    pub placement: &'static PlacementPolicy,
    pub strategy: QueueingStrategy,
    pub groups: Vec<GroupDef>,
    /// One slot per (group, flavor), groups in order, flavors in preference order.
    pub slots: Vec<SlotDef>,
    /// Per interned resource: the group covering it.
    pub covered: Vec<Option<usize>>,
    /// The built-in default queue: group 0 covers every resource, even unknown names.
    pub covers_everything: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct GroupDef {
    /// Covered resources in config order.
    pub resources: Vec<usize>,
    pub slots: Range<usize>,
}

#[derive(Debug, Clone)]
pub(crate) struct SlotDef {
    pub flavor: usize,
    pub group: usize,
    /// Per interned resource; `UNLIMITED` when not limited.
    pub quota: Vec<Milli>,
    /// Per interned resource: how much of the nominal quota cohort peers may borrow
    /// (`lending_limit`, else all of it); zero outside a cohort.
    pub lend: Vec<Milli>,
    /// Per interned resource: how far above nominal the queue may borrow; `UNLIMITED` when
    /// `borrowing_limit` is omitted, zero outside a cohort.
    pub borrow: Vec<Milli>,
}

fn err(path: impl Into<String>, message: impl Into<String>) -> CompileError {
    CompileError { path: path.into(), message: message.into() }
}

/// Compiles a (validated) config; see the module docs for what is refused.
pub fn compile(config: &SchedulerConfig) -> Result<Compiled, CompileError> {
    let mut resources: Vec<Name> = ["cpu", "gpu", "memory_gb"].into_iter().map(Name::from).collect();
    for q in config.queues() {
        for g in q.resource_groups.as_deref().unwrap_or_default() {
            for r in &g.covered_resources {
                if !resources.iter().any(|n| &**n == r.as_str()) {
                    resources.push(r.as_str().into());
                }
            }
        }
    }

    let mut flavors = Vec::new();
    let mut flavor_ids: HashMap<&str, usize> = HashMap::new();
    for (i, f) in config.flavors().iter().enumerate() {
        if flavor_ids.insert(f.name.as_str(), i).is_some() {
            return Err(err(format!("resource_flavors[{i}].name"), format!("flavor {} is defined twice", f.name)));
        }
        let selector = f.selector.clone().unwrap_or_default();
        flavors.push(FlavorDef { name: f.name.as_str().into(), described: describe(&selector), selector });
    }

    let mut queues = Vec::new();
    let mut queue_ids: HashMap<Name, usize> = HashMap::new();
    let mut cohorts: Vec<CohortDef> = Vec::new();
    for (qi, q) in config.queues().iter().enumerate() {
        let path = format!("resource_queues[{qi}]");
        let name: Name = q.name.as_str().into();
        if queue_ids.insert(name.clone(), qi).is_some() {
            return Err(err(format!("{path}.name"), format!("queue {} is defined twice", q.name)));
        }
        let mut def = compile_queue(q, &path, name, &resources, &flavor_ids)?;
        if let Some(c) = q.cohort_name.as_deref() {
            let at = match cohorts.iter().position(|d| &*d.name == c) {
                Some(at) => at,
                None => {
                    cohorts.push(CohortDef { name: c.into(), members: Vec::new(), fair: false });
                    cohorts.len() - 1
                }
            };
            cohorts[at].members.push(qi);
            cohorts[at].fair |= q.fair_sharing_weight.is_some();
            def.cohort = Some(at);
        }
        queues.push(def);
    }

    // The built-in `default` queue (see the module docs): where every job goes when there
    // are no rules, and the one queue rules may name when the config defines none (the
    // validator allows exactly that, see `app::config::validate`).
    let wants_builtin = config.rules().is_empty()
        || (config.queues().is_empty() && config.rules().iter().any(|r| r.resource_queue == DEFAULT_QUEUE));
    if wants_builtin && !queue_ids.contains_key(DEFAULT_QUEUE) {
        add_builtin_queue(&resources, &mut flavors, &flavor_ids, &mut queues);
        queue_ids.insert(DEFAULT_QUEUE.into(), queues.len() - 1);
    }

    for (i, r) in config.rules().iter().enumerate() {
        let path = format!("scheduling_rules[{i}]");
        if !queue_ids.contains_key(r.resource_queue.as_str()) {
            return Err(err(format!("{path}.resource_queue"), format!("queue {} is not defined", r.resource_queue)));
        }
        let p = r.priority_policy.clone().unwrap_or_default();
        if let (Some(min), Some(max)) = (p.min, p.max) {
            if min > max {
                return Err(err(format!("{path}.priority_policy"), format!("min {min} is greater than max {max}")));
            }
        }
        if let Some(d) = p.default {
            if p.min.is_some_and(|m| d < m) || p.max.is_some_and(|m| d > m) {
                return Err(err(format!("{path}.priority_policy.default"), format!("default {d} is outside [min, max]")));
            }
        }
    }

    Ok(Compiled { resources, flavors, queues, queue_ids, routing: Routing::new(config), cohorts })
}

/// One queue: its policies by name, and its resource groups as quota slots.
fn compile_queue(q: &ResourceQueue, path: &str, name: Name, resources: &[Name], flavor_ids: &HashMap<&str, usize>) -> Result<QueueDef, CompileError> {
    let res_id = |name: &str| resources.iter().position(|n| &**n == name);
    let unknown = |field: &str, v: &str, names: &[&str]| {
        err(format!("{path}.{field}"), format!("unknown {field} {v}; expected one of {}", names.join(", ")))
    };
    let ordering = policy::ordering(q.ordering_policy.as_deref()).ok_or_else(|| {
        unknown("ordering_policy", q.ordering_policy.as_deref().unwrap_or(""), app::config::ORDERING_POLICIES)
    })?;
    let placement = policy::placement(q.placement_policy.as_deref()).ok_or_else(|| {
        unknown("placement_policy", q.placement_policy.as_deref().unwrap_or(""), app::config::PLACEMENT_POLICIES)
    })?;
    let strategy = policy::queueing(q.queueing_strategy.as_deref()).ok_or_else(|| {
        unknown("queueing_strategy", q.queueing_strategy.as_deref().unwrap_or(""), app::config::QUEUEING_STRATEGIES)
    })?;
    let preempt_lower_priority = q
        .preemption
        .as_ref()
        .and_then(|p| p.within_resource_queue)
        .is_some_and(|w| w == WithinQueuePreemption::LowerPriority);
    // Lenient with what the validator refuses but an older build stored (the engine can run
    // it): limits outside a cohort do nothing, a lending limit above nominal lends the
    // nominal, and `borrow_within_cohort: any` preempts lower priority, as the SDK's
    // strongest value does.
    let in_cohort = q.cohort_name.is_some();
    let policy = |f: fn(&app::config::PreemptionPolicy) -> Option<CohortPreemption>| {
        q.preemption.as_ref().and_then(f).filter(|_| in_cohort).unwrap_or(CohortPreemption::Never)
    };
    let reclaim = match policy(|p| p.reclaim_within_cohort) {
        CohortPreemption::Never => Reclaim::Never,
        CohortPreemption::LowerPriority => Reclaim::LowerPriority,
        CohortPreemption::Any => Reclaim::Any,
    };
    let borrow_preempt = policy(|p| p.borrow_within_cohort) != CohortPreemption::Never && reclaim != Reclaim::Never;
    let weight = match q.fair_sharing_weight {
        Some(w) => quota_milli(w).ok_or_else(|| err(format!("{path}.fair_sharing_weight"), "must be a number ≥ 0 with at most 3 decimals"))?,
        None => Milli::units(1),
    };

    let mut groups = Vec::new();
    let mut slots = Vec::new();
    let mut covered = vec![None; resources.len()];
    for (gi, g) in q.resource_groups.as_deref().unwrap_or_default().iter().enumerate() {
        let gpath = format!("{path}.resource_groups[{gi}]");
        let mut group_res = Vec::new();
        for (ri, r) in g.covered_resources.iter().enumerate() {
            let id = res_id(r).unwrap_or_default();
            if covered[id].is_some() {
                return Err(err(
                    format!("{gpath}.covered_resources[{ri}]"),
                    format!("resource {r} is covered by more than one resource group of queue {}", q.name),
                ));
            }
            covered[id] = Some(gi);
            group_res.push(id);
        }
        let start = slots.len();
        for (fi, fq) in g.flavors.iter().enumerate() {
            let fpath = format!("{gpath}.flavors[{fi}]");
            let flavor = *flavor_ids
                .get(fq.name.as_str())
                .ok_or_else(|| err(format!("{fpath}.name"), format!("flavor {} is not defined", fq.name)))?;
            if slots.iter().any(|s: &SlotDef| s.flavor == flavor) {
                return Err(err(format!("{fpath}.name"), format!("flavor {} appears twice in queue {}", fq.name, q.name)));
            }
            let mut quota = vec![Milli::UNLIMITED; resources.len()];
            let mut lend = vec![Milli::ZERO; resources.len()];
            let mut borrow = vec![Milli::ZERO; resources.len()];
            for &k in &group_res {
                // A covered resource the flavor does not list: unlimited, all of it lent.
                lend[k] = if in_cohort { Milli::UNLIMITED } else { Milli::ZERO };
                borrow[k] = if in_cohort { Milli::UNLIMITED } else { Milli::ZERO };
            }
            for (si, spec) in fq.resources.as_deref().unwrap_or_default().iter().enumerate() {
                let spath = format!("{fpath}.resources[{si}]");
                let id = res_id(&spec.name).filter(|id| group_res.contains(id)).ok_or_else(|| {
                    err(format!("{spath}.name"), format!("resource {} is not among the group's covered_resources", spec.name))
                })?;
                let number = |field: &str, v: Option<f64>| -> Result<Option<Milli>, CompileError> {
                    v.map(|n| quota_milli(n).ok_or_else(|| err(format!("{spath}.{field}"), "must be a number ≥ 0 with at most 3 decimals")))
                        .transpose()
                };
                if let Some(n) = number("nominal_quota", spec.nominal_quota)? {
                    quota[id] = n;
                }
                let (lending, borrowing) = (number("lending_limit", spec.lending_limit)?, number("borrowing_limit", spec.borrowing_limit)?);
                if in_cohort {
                    lend[id] = lending.map_or(quota[id], |l| l.min(quota[id]));
                    borrow[id] = borrowing.unwrap_or(Milli::UNLIMITED);
                }
            }
            slots.push(SlotDef { flavor, group: gi, quota, lend, borrow });
        }
        groups.push(GroupDef { resources: group_res, slots: start..slots.len() });
    }
    Ok(QueueDef {
        name,
        preempt_lower_priority,
        cohort: None,
        reclaim,
        borrow_preempt,
        weight,
        ordering,
        placement,
        strategy,
        groups,
        slots,
        covered,
        covers_everything: false,
    })
}

/// Adds the built-in `default` queue: unlimited quota for every resource (even names no
/// queue covers) under the config's flavor `default`, or one compile adds that matches every
/// node.
fn add_builtin_queue(resources: &[Name], flavors: &mut Vec<FlavorDef>, flavor_ids: &HashMap<&str, usize>, queues: &mut Vec<QueueDef>) {
    let flavor = match flavor_ids.get(DEFAULT_QUEUE) {
        Some(&f) => f,
        None => {
            flavors.push(FlavorDef { name: DEFAULT_QUEUE.into(), selector: vec![], described: String::new() });
            flavors.len() - 1
        }
    };
    let n = resources.len();
    queues.push(QueueDef {
        name: DEFAULT_QUEUE.into(),
        preempt_lower_priority: false,
        cohort: None,
        reclaim: Reclaim::Never,
        borrow_preempt: false,
        weight: Milli::units(1),
        ordering: &policy::ORDERING[0],
        placement: &policy::PLACEMENT[0],
        strategy: QueueingStrategy::BestEffortFifo,
        groups: vec![GroupDef { resources: (0..n).collect(), slots: 0..1 }],
        slots: vec![SlotDef { flavor, group: 0, quota: vec![Milli::UNLIMITED; n], lend: vec![Milli::ZERO; n], borrow: vec![Milli::ZERO; n] }],
        covered: vec![Some(0); n],
        covers_everything: true,
    });
}

/// A quota number in milli-units, refusing negatives, NaN and more than 3 decimals.
fn quota_milli(n: f64) -> Option<Milli> {
    let m = Milli::from_f64(n)?;
    let exact = ((m.0 as f64) - n * 1000.0).abs() <= 1e-6 * n.abs().max(1.0);
    (m.0 >= 0 && exact).then_some(m)
}

/// A selector as a sentence fragment, e.g. `market in [spot] and zone exists`.
pub(crate) fn describe(selector: &[MatchExpression]) -> String {
    let parts: Vec<String> = selector
        .iter()
        .map(|e| {
            let values = e.values.as_deref().unwrap_or_default().join(", ");
            match e.operator {
                Operator::In => format!("{} in [{values}]", e.key),
                Operator::NotIn => format!("{} not in [{values}]", e.key),
                Operator::Exists => format!("{} exists", e.key),
                Operator::DoesNotExist => format!("{} does not exist", e.key),
            }
        })
        .collect();
    parts.join(" and ")
}

/// One quota cell of a compiled config, for dashboards and the simulator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaCell {
    /// Queue name.
    pub queue: Name,
    /// Flavor name.
    pub flavor: Name,
    /// Resource name.
    pub resource: Name,
    /// `None` = unlimited.
    pub nominal: Option<Milli>,
    /// The queue's cohort, if any.
    pub cohort: Option<Name>,
    /// What cohort peers may borrow of the nominal quota (`None` = unlimited); zero
    /// outside a cohort.
    pub lendable: Option<Milli>,
    /// How far above nominal the queue may borrow (`None` = no limit); zero outside a cohort.
    pub borrowing_limit: Option<Milli>,
}

impl Compiled {
    /// Queue names in config order (plus the built-in `default` when compile added it).
    pub fn queue_names(&self) -> impl Iterator<Item = &Name> + '_ {
        self.queues.iter().map(|q| &q.name)
    }

    /// Cohorts (name, member queues, fair sharing on) in order of first mention.
    pub fn cohorts(&self) -> impl Iterator<Item = (&Name, Vec<&Name>, bool)> + '_ {
        self.cohorts.iter().map(|c| (&c.name, c.members.iter().map(|&q| &self.queues[q].name).collect(), c.fair))
    }

    /// A queue's fair-sharing weight (1 unless set).
    pub fn weight(&self, queue: &str) -> Option<Milli> {
        Some(self.queues[*self.queue_ids.get(queue)?].weight)
    }

    /// The cohort of a queue, if it is in one.
    pub fn cohort_of(&self, queue: &str) -> Option<&Name> {
        let q = &self.queues[*self.queue_ids.get(queue)?];
        q.cohort.map(|c| &self.cohorts[c].name)
    }

    /// Whether a queue of this name exists.
    pub fn has_queue(&self, name: &str) -> bool {
        self.queue_ids.contains_key(name)
    }

    /// The config's own copy of a queue's name: jobs holding it share one allocation, and
    /// the engine finds their queue by address.
    pub fn queue_name(&self, name: &str) -> Option<&Name> {
        self.queue_ids.get(name).map(|&q| &self.queues[q].name)
    }

    /// The queueing strategy of a queue whose ordering policy is fifo (its jobs are ordered
    /// by priority, enqueue time and id alone); `None` for another policy or no such queue.
    pub fn fifo_strategy(&self, queue: &str) -> Option<QueueingStrategy> {
        let def = &self.queues[*self.queue_ids.get(queue)?];
        (def.ordering.name == "fifo").then_some(def.strategy)
    }

    /// Every (queue, flavor, covered resource) with its nominal quota, in config order.
    pub fn quota_cells(&self) -> Vec<QuotaCell> {
        let mut out = Vec::new();
        for q in &self.queues {
            for s in &q.slots {
                for (r, g) in q.covered.iter().enumerate() {
                    if *g == Some(s.group) {
                        let limited = |m: Milli| (m != Milli::UNLIMITED).then_some(m);
                        out.push(QuotaCell {
                            queue: q.name.clone(),
                            flavor: self.flavors[s.flavor].name.clone(),
                            resource: self.resources[r].clone(),
                            nominal: limited(s.quota[r]),
                            cohort: q.cohort.map(|c| self.cohorts[c].name.clone()),
                            lendable: limited(s.lend[r]),
                            borrowing_limit: limited(s.borrow[r]),
                        });
                    }
                }
            }
        }
        out
    }

    /// Nominal quota of one cell: `None` when the queue does not offer that flavor for that
    /// resource, `Some(None)` when unlimited.
    pub fn nominal_quota(&self, queue: &str, flavor: &str, resource: &str) -> Option<Option<Milli>> {
        let q = &self.queues[*self.queue_ids.get(queue)?];
        let r = self.resources.iter().position(|n| &**n == resource);
        let slot = q.slots.iter().find(|s| &*self.flavors[s.flavor].name == flavor)?;
        match r {
            Some(r) if q.covered[r] == Some(slot.group) => {
                Some((slot.quota[r] != Milli::UNLIMITED).then_some(slot.quota[r]))
            }
            None if q.covers_everything => Some(None),
            _ => None,
        }
    }
}
