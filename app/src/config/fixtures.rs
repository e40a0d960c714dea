//! Test fixtures shared by the config modules: the seed example, small builders and
//! proptest strategies for whole configs.

use proptest::prelude::*;

use super::model::*;

/// The example YAML of seed 000, byte for byte.
pub const SEED_EXAMPLE: &str = include_str!("testdata/seed_example.yaml");

/// A selector expression.
pub fn expr(key: &str, operator: Operator, values: &[&str]) -> MatchExpression {
    let values = (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect());
    MatchExpression { key: key.into(), operator, values }
}

/// A flavor with an optional selector.
pub fn flavor(name: &str, selector: Option<Vec<MatchExpression>>) -> ResourceFlavor {
    ResourceFlavor { name: name.into(), selector, advanced_instance_config: None }
}

/// A quota entry.
pub fn quota(name: &str, nominal: Option<f64>) -> ResourceQuotaSpec {
    ResourceQuotaSpec { name: name.into(), nominal_quota: nominal, ..Default::default() }
}

/// A flavor quota with the given resource quotas.
pub fn flavor_quota(name: &str, resources: Vec<ResourceQuotaSpec>) -> FlavorQuota {
    FlavorQuota { name: name.into(), resources: Some(resources) }
}

/// A resource group.
pub fn group(covered: &[&str], flavors: Vec<FlavorQuota>) -> ResourceGroup {
    ResourceGroup { covered_resources: covered.iter().map(|s| s.to_string()).collect(), flavors }
}

/// A queue with the given groups.
pub fn queue(name: &str, groups: Vec<ResourceGroup>) -> ResourceQueue {
    ResourceQueue { name: name.into(), resource_groups: Some(groups), ..Default::default() }
}

/// A rule; `None` selector = catch-all.
pub fn rule(queue: &str, selector: Option<Vec<MatchExpression>>) -> SchedulingRule {
    SchedulingRule { resource_queue: queue.into(), selector, priority_policy: None }
}

/// The seed example as a value.
pub fn seed_config() -> SchedulerConfig {
    SchedulerConfig {
        resource_flavors: Some(vec![flavor("spot", Some(vec![expr("market", Operator::In, &["spot"])]))]),
        resource_queues: Some(vec![ResourceQueue {
            preemption: Some(PreemptionPolicy {
                within_resource_queue: Some(WithinQueuePreemption::LowerPriority),
                ..Default::default()
            }),
            ..queue("research", vec![group(&["gpu"], vec![flavor_quota("spot", vec![quota("gpu", Some(64.0))])])])
        }]),
        scheduling_rules: Some(vec![SchedulingRule {
            priority_policy: Some(PriorityPolicy {
                default: Some(50),
                min: Some(0),
                max: Some(100),
                on_violation: Some(OnViolation::Reject),
            }),
            ..rule("research", Some(vec![expr("team", Operator::In, &["research"])]))
        }]),
        recycle_policy: None,
    }
}

/// Strings that trip naive YAML emitters, plus arbitrary Unicode.
pub fn nasty_string() -> impl Strategy<Value = String> {
    let literals: Vec<String> = [
        "",
        " ",
        "a ",
        " a",
        "true",
        "False",
        "NO",
        "yes",
        "on",
        "Off",
        "y",
        "N",
        "null",
        "Null",
        "~",
        "1",
        "-1",
        "+1",
        "1.5",
        "1e3",
        "0x1F",
        "0o17",
        "012",
        ".5",
        ".inf",
        "-.inf",
        ".nan",
        "inf",
        "NaN",
        "a: b",
        "a:b",
        "#c",
        "a #c",
        "a,b",
        "[x]",
        "{x}",
        "- x",
        "-",
        "?",
        ":",
        "&a",
        "*a",
        "!t",
        "|",
        ">",
        "'q'",
        "\"q\"",
        "%x",
        "@x",
        "`x",
        "a\nb",
        "tab\t",
        "\u{0}",
        "\u{7f}",
        "\u{85}",
        "\u{a0}",
        "\u{2028}",
        "\u{feff}x",
        "\u{fffe}",
        "é",
        "日本",
        "🚀",
        "\\",
        "a\\nb",
        "<<",
        "=",
        "spot",
        "us-east-1",
        "p3.2xlarge",
        "node.kubernetes.io/instance-type",
        "my queue",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    prop_oneof![
        3 => proptest::sample::select(literals),
        2 => "[a-z_][a-z0-9_.-]{0,8}",
        1 => any::<String>(),
    ]
}

fn small_vec<T: std::fmt::Debug>(s: impl Strategy<Value = T>) -> impl Strategy<Value = Vec<T>> {
    proptest::collection::vec(s, 0..3)
}

fn opt<T: std::fmt::Debug + Clone>(s: impl Strategy<Value = T>) -> impl Strategy<Value = Option<T>> {
    proptest::option::of(s)
}

/// Any float a quota could hold, including the awkward ones (but not NaN, which is never
/// equal to itself).
pub fn quota_number() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(-0.0),
        Just(64.0),
        Just(0.5),
        Just(1.125),
        Just(0.1 + 0.2),
        Just(1e300),
        Just(1e-7),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        (0u32..100_000).prop_map(|n| f64::from(n) / 1000.0),
        any::<f64>().prop_filter("not NaN", |x| !x.is_nan()),
    ]
}

fn operator() -> impl Strategy<Value = Operator> {
    prop_oneof![Just(Operator::In), Just(Operator::NotIn), Just(Operator::Exists), Just(Operator::DoesNotExist)]
}

fn selector() -> impl Strategy<Value = Option<Vec<MatchExpression>>> {
    let e = (nasty_string(), operator(), opt(small_vec(nasty_string())))
        .prop_map(|(key, operator, values)| MatchExpression { key, operator, values });
    opt(small_vec(e))
}

/// Free-form JSON, as found in `advanced_instance_config`.
pub fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_filter("finite", |x| x.is_finite()).prop_map(serde_json::Value::from),
        Just(serde_json::Value::from(1.0)),
        nasty_string().prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            small_vec(inner.clone()).prop_map(serde_json::Value::Array),
            json_map(inner).prop_map(serde_json::Value::Object),
        ]
    })
}

fn json_map(
    value: impl Strategy<Value = serde_json::Value>,
) -> impl Strategy<Value = serde_json::Map<String, serde_json::Value>> {
    small_vec((nasty_string(), value)).prop_map(|pairs| pairs.into_iter().collect())
}

fn flavor_strategy() -> impl Strategy<Value = ResourceFlavor> {
    (nasty_string(), selector(), opt(json_map(json_value()))).prop_map(|(name, selector, advanced_instance_config)| {
        ResourceFlavor { name, selector, advanced_instance_config }
    })
}

fn quota_spec() -> impl Strategy<Value = ResourceQuotaSpec> {
    (nasty_string(), opt(quota_number()), opt(quota_number()), opt(quota_number())).prop_map(
        |(name, nominal_quota, borrowing_limit, lending_limit)| ResourceQuotaSpec {
            name,
            nominal_quota,
            borrowing_limit,
            lending_limit,
        },
    )
}

fn group_strategy() -> impl Strategy<Value = ResourceGroup> {
    let fq =
        (nasty_string(), opt(small_vec(quota_spec()))).prop_map(|(name, resources)| FlavorQuota { name, resources });
    (small_vec(nasty_string()), small_vec(fq))
        .prop_map(|(covered_resources, flavors)| ResourceGroup { covered_resources, flavors })
}

fn cohort_preemption() -> impl Strategy<Value = CohortPreemption> {
    prop_oneof![Just(CohortPreemption::Never), Just(CohortPreemption::LowerPriority), Just(CohortPreemption::Any)]
}

fn queue_strategy() -> impl Strategy<Value = ResourceQueue> {
    let within = prop_oneof![Just(WithinQueuePreemption::Never), Just(WithinQueuePreemption::LowerPriority)];
    let preemption = (opt(within), opt(cohort_preemption()), opt(cohort_preemption())).prop_map(
        |(within_resource_queue, reclaim_within_cohort, borrow_within_cohort)| PreemptionPolicy {
            within_resource_queue,
            reclaim_within_cohort,
            borrow_within_cohort,
        },
    );
    let names = (opt(nasty_string()), opt(nasty_string()), opt(nasty_string()), opt(nasty_string()));
    (nasty_string(), opt(preemption), opt(small_vec(group_strategy())), names, opt(quota_number())).prop_map(
        |(name, preemption, resource_groups, (cohort_name, ordering_policy, placement_policy, queueing_strategy), fair_sharing_weight)| {
            ResourceQueue {
                name,
                preemption,
                resource_groups,
                cohort_name,
                fair_sharing_weight,
                ordering_policy,
                placement_policy,
                queueing_strategy,
            }
        },
    )
}

fn rule_strategy() -> impl Strategy<Value = SchedulingRule> {
    let on_violation = prop_oneof![Just(OnViolation::Reject), Just(OnViolation::ForceUpdate)];
    let policy = (opt(any::<i64>()), opt(any::<i64>()), opt(any::<i64>()), opt(on_violation))
        .prop_map(|(default, min, max, on_violation)| PriorityPolicy { default, min, max, on_violation });
    (nasty_string(), selector(), opt(policy)).prop_map(|(resource_queue, selector, priority_policy)| SchedulingRule {
        resource_queue,
        selector,
        priority_policy,
    })
}

/// Any config, valid or not, with nasty strings and numbers throughout.
pub fn config_strategy() -> impl Strategy<Value = SchedulerConfig> {
    let recycle = (opt(nasty_string()), opt(any::<i64>()), opt(nasty_string())).prop_map(
        |(rotation_interval, max_workloads, max_idle_duration)| RecyclePolicy { rotation_interval, max_workloads, max_idle_duration },
    );
    (opt(small_vec(flavor_strategy())), opt(small_vec(queue_strategy())), opt(small_vec(rule_strategy())), opt(recycle)).prop_map(
        |(resource_flavors, resource_queues, scheduling_rules, recycle_policy)| SchedulerConfig {
            resource_flavors,
            resource_queues,
            scheduling_rules,
            recycle_policy,
        },
    )
}
