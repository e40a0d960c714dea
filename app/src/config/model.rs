//! The scheduler config exactly as an admin writes it (Anyscale GRS schema, seed 000).
//!
//! These are the *raw* types: what was parsed, before any check. Field order here is the
//! canonical key order of the YAML output. Optional fields are skipped when absent so a
//! config that uses only the seed's fields round-trips unchanged. The real Anyscale model's
//! fields the seed page leaves out (cohorts, lending and borrowing limits, cohort preemption)
//! and Berth's own extensions (fair-sharing weight, ordering, placement, queueing) are
//! optional fields too.

use serde::{Deserialize, Serialize};

/// Top-level Global Resource Scheduler config.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SchedulerConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_flavors: Option<Vec<ResourceFlavor>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_queues: Option<Vec<ResourceQueue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_rules: Option<Vec<SchedulingRule>>,
    /// Node recycling, as the Anyscale API's model has it: accepted and stored so configs
    /// written for that API apply unchanged, but Berth recycles no nodes (the validator warns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recycle_policy: Option<RecyclePolicy>,
}

/// When the nodes a workload ran on are replaced (Anyscale API's `RecyclePolicy`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecyclePolicy {
    /// How often nodes are rotated, e.g. `24h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation_interval: Option<String>,
    /// Workloads a node runs before it is replaced; at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_workloads: Option<i64>,
    /// How long a node may stay idle before it is replaced, e.g. `30m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_idle_duration: Option<String>,
}

/// A named flavor: which nodes count as it (selector) plus optional launch overrides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceFlavor {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<Vec<MatchExpression>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advanced_instance_config: Option<serde_json::Map<String, serde_json::Value>>,
}

/// One structured label match, used by flavor and rule selectors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchExpression {
    pub key: String,
    pub operator: Operator,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

/// Match operator of a [`MatchExpression`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// A queue requests are routed to, with optional preemption and per-flavor quotas.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceQueue {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<PreemptionPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_groups: Option<Vec<ResourceGroup>>,
    /// Queues sharing a cohort_name pool their unused nominal quota: a queue at its nominal
    /// may borrow a peer's idle quota, and the peer reclaims it per its preemption policy.
    /// Requires `resource_groups` (field of the real Anyscale model, not of the seed page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cohort_name: Option<String>,
    /// Berth extension (Kueue's fair sharing): this queue's weight when cohort peers compete
    /// for the same idle quota. Fair sharing is on in a cohort as soon as one member sets it;
    /// members that do not weigh 1. `0` borrows only what no one else wants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_sharing_weight: Option<f64>,
    /// Extension: order of equal-priority pending jobs, one of [`ORDERING_POLICIES`] (default `fifo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering_policy: Option<String>,
    /// Extension: node choice among those that fit, one of [`PLACEMENT_POLICIES`] (default `bin_packing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_policy: Option<String>,
    /// Extension: whether a job that does not fit blocks the ones behind it, one of
    /// [`QUEUEING_STRATEGIES`] (default `best_effort_fifo`: it does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queueing_strategy: Option<String>,
}

/// Names accepted by `ordering_policy`; the first is the default.
pub const ORDERING_POLICIES: &[&str] = &["fifo", "large_resource", "small_first"];
/// Names accepted by `placement_policy`; the first is the default.
pub const PLACEMENT_POLICIES: &[&str] = &["bin_packing", "spread"];
/// Names accepted by `queueing_strategy`; the first is the default.
pub const QUEUEING_STRATEGIES: &[&str] = &["best_effort_fifo", "strict_fifo"];
/// Values accepted by `reclaim_within_cohort`.
pub const RECLAIM_POLICIES: &[&str] = &["never", "lower_priority", "any"];
/// Values accepted by `borrow_within_cohort` (the SDK's enum has no `any`).
pub const BORROW_POLICIES: &[&str] = &["never", "lower_priority"];

/// Preemption settings of a queue.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreemptionPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_resource_queue: Option<WithinQueuePreemption>,
    /// Whether this queue may preempt jobs of cohort peers that are above their nominal
    /// quota, to take back its own nominal: `never` (wait for borrowers to finish),
    /// `lower_priority` (only strictly lower-priority borrowers), `any`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_within_cohort: Option<CohortPreemption>,
    /// Whether this queue may preempt strictly lower-priority jobs of cohort peers that are
    /// above their nominal quota, in order to borrow: `never` or `lower_priority` (the
    /// validator refuses `any`, which older Berth builds accepted and the SDK cannot read);
    /// not `never` requires `reclaim_within_cohort` of `lower_priority` or `any`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrow_within_cohort: Option<CohortPreemption>,
}

/// Preemption among the jobs of one queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WithinQueuePreemption {
    Never,
    LowerPriority,
}

/// Preemption across a cohort (`reclaim_within_cohort`, `borrow_within_cohort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CohortPreemption {
    Never,
    LowerPriority,
    Any,
}

/// A set of covered resources with the flavors (in order of preference) that provide them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceGroup {
    pub covered_resources: Vec<String>,
    pub flavors: Vec<FlavorQuota>,
}

/// Per-flavor quotas within a resource group.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlavorQuota {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<ResourceQuotaSpec>>,
}

/// Quota for one resource of one flavor. Omitted `nominal_quota` = unlimited; 0 = blocked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceQuotaSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nominal_quota: Option<f64>,
    /// How far above the nominal quota this queue may go by borrowing unused quota from
    /// cohort peers. Omitted: no limit. Only valid on a queue with a `cohort_name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowing_limit: Option<f64>,
    /// How much of the nominal quota cohort peers may borrow while this queue is not using
    /// it; at most `nominal_quota`. Omitted: all unused nominal quota is lent. Only valid on
    /// a queue with a `cohort_name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lending_limit: Option<f64>,
}

/// Routes matching requests to a queue, with optional priority bounds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SchedulingRule {
    pub resource_queue: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<Vec<MatchExpression>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_policy: Option<PriorityPolicy>,
}

/// Priority bounds applied to requests matched by a rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorityPolicy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_violation: Option<OnViolation>,
}

/// What to do with a priority outside `[min, max]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnViolation {
    Reject,
    ForceUpdate,
}

impl SchedulerConfig {
    /// The flavors, or an empty slice when the section is absent.
    pub fn flavors(&self) -> &[ResourceFlavor] {
        self.resource_flavors.as_deref().unwrap_or_default()
    }

    /// The queues, or an empty slice when the section is absent.
    pub fn queues(&self) -> &[ResourceQueue] {
        self.resource_queues.as_deref().unwrap_or_default()
    }

    /// The rules in evaluation order, or an empty slice when the section is absent.
    pub fn rules(&self) -> &[SchedulingRule] {
        self.scheduling_rules.as_deref().unwrap_or_default()
    }

    /// What a fresh install starts with: flavor `local`, queue `default` without limits and
    /// one catch-all rule, so every job has somewhere to go on first start.
    pub fn initial() -> Self {
        SchedulerConfig {
            resource_flavors: Some(vec![ResourceFlavor {
                name: "local".into(),
                selector: None,
                advanced_instance_config: None,
            }]),
            resource_queues: Some(vec![ResourceQueue {
                name: "default".into(),
                resource_groups: Some(vec![ResourceGroup {
                    covered_resources: vec!["cpu".into(), "gpu".into(), "memory_gb".into()],
                    flavors: vec![FlavorQuota { name: "local".into(), resources: None }],
                }]),
                ..Default::default()
            }]),
            scheduling_rules: Some(vec![SchedulingRule {
                resource_queue: "default".into(),
                selector: None,
                priority_policy: None,
            }]),
            recycle_policy: None,
        }
    }
}

impl CohortPreemption {
    /// The value as written in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            CohortPreemption::Never => "never",
            CohortPreemption::LowerPriority => "lower_priority",
            CohortPreemption::Any => "any",
        }
    }
}

impl Operator {
    /// The operator as written in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::In => "in",
            Operator::NotIn => "not_in",
            Operator::Exists => "exists",
            Operator::DoesNotExist => "does_not_exist",
        }
    }

    /// Whether the operator takes a `values` list.
    pub fn takes_values(self) -> bool {
        matches!(self, Operator::In | Operator::NotIn)
    }
}
