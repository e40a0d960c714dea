//! Validation and compilation agree: every config `app::config::validate` accepts compiles.
//!
//! The configs come from small pools of names, numbers and policy words, some valid and
//! some not, so that a good share of them pass validation (random strings almost never
//! would) and the cases where the two could disagree — the built-in `default` queue,
//! duplicate names, unknown policies, uncovered resources — come up often.

use app::config::validate::validate;
use app::config::*;
use proptest::prelude::*;

use crate::engine::compile;

const NAMES: [&str; 4] = ["default", "a", "b", "gpu-pool"];
const RESOURCES: [&str; 5] = ["cpu", "gpu", "memory_gb", "tpu", ""];

fn name() -> impl Strategy<Value = String> {
    proptest::sample::select(&NAMES[..]).prop_map(str::to_string)
}

fn word(words: &'static [&'static str]) -> impl Strategy<Value = Option<String>> {
    proptest::option::of(prop_oneof![4 => proptest::sample::select(words).prop_map(str::to_string), 1 => Just("nope".to_string())])
}

fn number() -> impl Strategy<Value = Option<f64>> {
    proptest::option::of(prop_oneof![Just(0.0), Just(1.0), Just(2.5), Just(1e15), Just(-1.0), Just(0.0001)])
}

fn flavor() -> impl Strategy<Value = ResourceFlavor> {
    let selector = proptest::option::of(proptest::collection::vec(
        (name(), prop_oneof![Just(Operator::In), Just(Operator::Exists), Just(Operator::NotIn)], proptest::option::of(proptest::collection::vec(name(), 0..2)))
            .prop_map(|(key, operator, values)| MatchExpression { key, operator, values }),
        0..2,
    ));
    (name(), selector).prop_map(|(name, selector)| ResourceFlavor { name, selector, advanced_instance_config: None })
}

fn group() -> impl Strategy<Value = ResourceGroup> {
    let spec = (proptest::sample::select(&RESOURCES[..]), number(), number(), number()).prop_map(|(r, nominal_quota, borrowing_limit, lending_limit)| {
        ResourceQuotaSpec { name: r.to_string(), nominal_quota, borrowing_limit, lending_limit }
    });
    let fq = (name(), proptest::option::of(proptest::collection::vec(spec, 0..3))).prop_map(|(name, resources)| FlavorQuota { name, resources });
    (proptest::sample::subsequence(&RESOURCES[..4], 0..3), proptest::collection::vec(fq, 0..3)).prop_map(|(covered, flavors)| ResourceGroup {
        covered_resources: covered.into_iter().map(str::to_string).collect(),
        flavors,
    })
}

fn queue() -> impl Strategy<Value = ResourceQueue> {
    let cohort = || proptest::option::of(prop_oneof![Just(CohortPreemption::Never), Just(CohortPreemption::LowerPriority), Just(CohortPreemption::Any)]);
    let preemption = proptest::option::of(
        (
            proptest::option::of(prop_oneof![Just(WithinQueuePreemption::Never), Just(WithinQueuePreemption::LowerPriority)]),
            cohort(),
            cohort(),
        )
            .prop_map(|(within_resource_queue, reclaim_within_cohort, borrow_within_cohort)| PreemptionPolicy {
                within_resource_queue,
                reclaim_within_cohort,
                borrow_within_cohort,
            }),
    );
    let policies = (word(ORDERING_POLICIES), word(PLACEMENT_POLICIES), word(QUEUEING_STRATEGIES));
    (name(), preemption, proptest::option::of(proptest::collection::vec(group(), 0..3)), (proptest::option::of(name()), number()), policies).prop_map(
        |(name, preemption, resource_groups, (cohort_name, fair_sharing_weight), (ordering_policy, placement_policy, queueing_strategy))| ResourceQueue {
            name,
            preemption,
            resource_groups,
            cohort_name,
            fair_sharing_weight,
            ordering_policy,
            placement_policy,
            queueing_strategy,
        },
    )
}

fn rule() -> impl Strategy<Value = SchedulingRule> {
    let bound = || proptest::option::of(-3i64..4);
    let on_violation = proptest::option::of(prop_oneof![Just(OnViolation::Reject), Just(OnViolation::ForceUpdate)]);
    let policy = proptest::option::of((bound(), bound(), bound(), on_violation).prop_map(|(default, min, max, on_violation)| PriorityPolicy {
        default,
        min,
        max,
        on_violation,
    }));
    (name(), policy).prop_map(|(resource_queue, priority_policy)| SchedulingRule { resource_queue, selector: None, priority_policy })
}

/// Configs built from a few names, numbers and policy words: valid ones often, invalid ones
/// in every way the pools allow.
pub(crate) fn near_valid_config() -> impl Strategy<Value = SchedulerConfig> {
    let some = |n| 0..n;
    (
        proptest::option::of(proptest::collection::vec(flavor(), some(3))),
        proptest::option::of(proptest::collection::vec(queue(), some(3))),
        proptest::option::of(proptest::collection::vec(rule(), some(3))),
    )
        .prop_map(|(resource_flavors, resource_queues, scheduling_rules)| SchedulerConfig { resource_flavors, resource_queues, scheduling_rules, recycle_policy: None })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, max_global_rejects: 50_000, ..ProptestConfig::default() })]

    #[test]
    fn every_config_that_validates_compiles(cfg in near_valid_config()) {
        let report = validate(&cfg);
        prop_assume!(!report.has_errors());
        if let Err(e) = compile(&cfg) {
            let yaml = serde_json::to_string_pretty(&cfg).unwrap_or_default();
            prop_assert!(false, "validate accepts but compile refuses ({e}):\n{yaml}");
        }
    }
}

/// The generator is not vacuous: a fair share of its configs validate, and some of those
/// use the built-in `default` queue with rules.
#[test]
fn the_generator_makes_valid_configs_of_every_shape() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut valid, mut builtin_with_rules) = (0, 0);
    for _ in 0..2000 {
        let cfg = near_valid_config().new_tree(&mut runner).expect("a tree").current();
        if !validate(&cfg).has_errors() {
            valid += 1;
            builtin_with_rules += usize::from(cfg.queues().is_empty() && !cfg.rules().is_empty());
        }
    }
    assert!(valid >= 200, "only {valid} of 2000 generated configs validate");
    assert!(builtin_with_rules >= 20, "only {builtin_with_rules} valid configs route rules to the built-in queue");
}

/// The case a user hit: rules but no queues, routed to the built-in queue, compile to a
/// config that routes there.
#[test]
fn a_rule_may_name_the_builtin_queue_when_no_queue_is_defined() {
    let cfg = SchedulerConfig { scheduling_rules: Some(vec![SchedulingRule { resource_queue: "default".into(), ..Default::default() }]), ..Default::default() };
    assert!(!validate(&cfg).has_errors());
    let compiled = compile(&cfg).expect("compiles");
    let routed = crate::engine::route(&compiled, &Default::default(), None).expect("routed");
    assert_eq!(&*routed.queue, "default");
}
