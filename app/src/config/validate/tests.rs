use super::*;
use crate::config::fixtures::*;
use crate::config::model::*;
use crate::config::problem::Severity::{self, Error, Warning};

/// The seed example plus a catch-all rule: a config without any problem.
fn base() -> SchedulerConfig {
    let mut cfg = seed_config();
    cfg.scheduling_rules.as_mut().unwrap().push(rule("research", None));
    cfg
}

fn flavors(c: &mut SchedulerConfig) -> &mut Vec<ResourceFlavor> {
    c.resource_flavors.as_mut().unwrap()
}

fn queues(c: &mut SchedulerConfig) -> &mut Vec<ResourceQueue> {
    c.resource_queues.as_mut().unwrap()
}

fn rules(c: &mut SchedulerConfig) -> &mut Vec<SchedulingRule> {
    c.scheduling_rules.as_mut().unwrap()
}

fn groups(c: &mut SchedulerConfig) -> &mut Vec<ResourceGroup> {
    queues(c)[0].resource_groups.as_mut().unwrap()
}

/// The one quota of the base config (research / group 0 / spot / gpu).
fn spec(c: &mut SchedulerConfig) -> &mut ResourceQuotaSpec {
    &mut groups(c)[0].flavors[0].resources.as_mut().unwrap()[0]
}

fn policy(c: &mut SchedulerConfig) -> &mut PriorityPolicy {
    rules(c)[0].priority_policy.as_mut().unwrap()
}

/// Puts `research` in cohort `lab` with a second queue `batch` (routed, so no warning).
fn in_cohort(c: &mut SchedulerConfig) {
    queues(c)[0].cohort_name = Some("lab".into());
    let mut batch = queue("batch", vec![group(&["gpu"], vec![flavor_quota("spot", vec![quota("gpu", Some(8.0))])])]);
    batch.cohort_name = Some("lab".into());
    queues(c).push(batch);
    rules(c).insert(0, rule("batch", Some(vec![expr("team", Operator::In, &["batch"])])));
}

/// Sets the cohort preemption policies of `research`.
fn cohort_policy(c: &mut SchedulerConfig, reclaim: Option<CohortPreemption>, borrow: Option<CohortPreemption>) {
    let p = queues(c)[0].preemption.get_or_insert_with(Default::default);
    p.reclaim_within_cohort = reclaim;
    p.borrow_within_cohort = borrow;
}

fn found(report: &Report) -> Vec<(Severity, &str)> {
    report.problems.iter().map(|p| (p.severity, p.path.as_str())).collect()
}

const QUOTA: &str = "resource_queues[0].resource_groups[0].flavors[0].resources[0]";

type Mutation = fn(&mut SchedulerConfig);

type Case = (&'static str, Mutation, &'static [(Severity, &'static str)]);

#[rustfmt::skip]
const CASES: &[Case] = &[
    ("valid base", |_| {}, &[]),
    ("blank flavor name", |c| flavors(c).push(flavor(" ", None)), &[(Error, "resource_flavors[1].name")]),
    ("duplicate flavor", |c| flavors(c).push(flavor("spot", None)), &[(Error, "resource_flavors[1].name")]),
    ("blank queue name", |c| { let q = queues(c)[0].clone(); queues(c).push(ResourceQueue { name: "".into(), ..q }) },
        &[(Error, "resource_queues[1].name")]),
    ("duplicate queue", |c| { let q = queues(c)[0].clone(); queues(c).push(q) }, &[(Error, "resource_queues[1].name")]),
    ("blank selector key", |c| flavors(c)[0].selector.as_mut().unwrap()[0].key.clear(),
        &[(Error, "resource_flavors[0].selector[0].key")]),
    ("in without values", |c| flavors(c)[0].selector.as_mut().unwrap()[0].values = None,
        &[(Error, "resource_flavors[0].selector[0].values")]),
    ("in with empty values", |c| flavors(c)[0].selector.as_mut().unwrap()[0].values = Some(vec![]),
        &[(Error, "resource_flavors[0].selector[0].values")]),
    ("not_in without values in a rule", |c| rules(c)[0].selector = Some(vec![expr("team", Operator::NotIn, &[])]),
        &[(Error, "scheduling_rules[0].selector[0].values")]),
    ("exists with values", |c| flavors(c)[0].selector = Some(vec![expr("market", Operator::Exists, &["spot"])]),
        &[(Error, "resource_flavors[0].selector[0].values")]),
    ("does_not_exist with an empty list", |c| {
        flavors(c)[0].selector = Some(vec![MatchExpression { values: Some(vec![]), ..expr("gpu", Operator::DoesNotExist, &[]) }])
    }, &[]),
    ("negative quota", |c| spec(c).nominal_quota = Some(-1.0), &[(Error, "resource_queues[0].resource_groups[0].flavors[0].resources[0].nominal_quota")]),
    ("infinite quota", |c| spec(c).nominal_quota = Some(f64::INFINITY), &[(Error, "resource_queues[0].resource_groups[0].flavors[0].resources[0].nominal_quota")]),
    ("NaN quota", |c| spec(c).nominal_quota = Some(f64::NAN), &[(Error, "resource_queues[0].resource_groups[0].flavors[0].resources[0].nominal_quota")]),
    ("four decimals", |c| spec(c).nominal_quota = Some(0.0001), &[(Error, "resource_queues[0].resource_groups[0].flavors[0].resources[0].nominal_quota")]),
    ("float noise is not a decimal", |c| spec(c).nominal_quota = Some(0.1 + 0.2), &[]),
    ("three decimals and zero are fine", |c| { spec(c).nominal_quota = Some(1.005); in_cohort(c); spec(c).lending_limit = Some(0.0) }, &[]),
    ("bad borrowing and lending limits", |c| { in_cohort(c); spec(c).borrowing_limit = Some(-2.0); spec(c).lending_limit = Some(1.2345) }, &[
        (Error, "resource_queues[0].resource_groups[0].flavors[0].resources[0].borrowing_limit"),
        (Error, "resource_queues[0].resource_groups[0].flavors[0].resources[0].lending_limit"),
    ]),
    ("no covered resources", |c| groups(c)[0].covered_resources.clear(), &[
        (Error, "resource_queues[0].resource_groups[0].covered_resources"),
        (Error, "resource_queues[0].resource_groups[0].flavors[0].resources[0].name"),
    ]),
    ("blank covered resource", |c| groups(c)[0].covered_resources.push("".into()),
        &[(Error, "resource_queues[0].resource_groups[0].covered_resources[1]")]),
    ("covered resource twice", |c| groups(c)[0].covered_resources.push("gpu".into()),
        &[(Error, "resource_queues[0].resource_groups[0].covered_resources[1]")]),
    ("a queue without resource groups, and the rule routing to it", |c| queues(c)[0].resource_groups = None, &[
        (Warning, "resource_flavors[0]"),
        (Warning, "resource_queues[0]"),
        (Warning, "scheduling_rules[0].resource_queue"),
        (Warning, "scheduling_rules[1].resource_queue"),
    ]),
    ("group without flavors", |c| groups(c).push(group(&["cpu"], vec![])),
        &[(Error, "resource_queues[0].resource_groups[1].flavors")]),
    ("quota for an uncovered resource", |c| groups(c)[0].flavors[0].resources.as_mut().unwrap().push(quota("cpu", Some(4.0))),
        &[(Error, "resource_queues[0].resource_groups[0].flavors[0].resources[1].name")]),
    ("quota listed twice", |c| groups(c)[0].flavors[0].resources.as_mut().unwrap().push(quota("gpu", Some(8.0))),
        &[(Error, "resource_queues[0].resource_groups[0].flavors[0].resources[1].name")]),
    ("resource covered by two groups", |c| {
        flavors(c).push(flavor("ondemand", None));
        groups(c).push(group(&["cpu", "gpu"], vec![flavor_quota("ondemand", vec![])]));
    }, &[(Error, "resource_queues[0].resource_groups[1].covered_resources[1]")]),
    ("flavor twice in a queue", |c| groups(c).push(group(&["cpu"], vec![flavor_quota("spot", vec![])])),
        &[(Error, "resource_queues[0].resource_groups[1].flavors[0].name")]),
    ("undefined flavor", |c| groups(c)[0].flavors[0].name = "spto".into(), &[
        (Warning, "resource_flavors[0]"),
        (Error, "resource_queues[0].resource_groups[0].flavors[0].name"),
    ]),
    ("blank flavor quota name", |c| groups(c)[0].flavors[0].name.clear(), &[
        (Warning, "resource_flavors[0]"),
        (Error, "resource_queues[0].resource_groups[0].flavors[0].name"),
    ]),
    ("blank quota resource name", |c| spec(c).name.clear(),
        &[(Error, "resource_queues[0].resource_groups[0].flavors[0].resources[0].name")]),
    ("min above max", |c| { policy(c).min = Some(10); policy(c).max = Some(5); policy(c).default = None },
        &[(Error, "scheduling_rules[0].priority_policy.min")]),
    ("default below min", |c| policy(c).default = Some(-1), &[
        (Warning, "scheduling_rules[0].priority_policy.default"),
        (Error, "scheduling_rules[0].priority_policy.default"),
    ]),
    ("negative priorities are allowed, but not readable by the SDK", |c| { policy(c).min = Some(-10); policy(c).default = Some(-5) }, &[
        (Warning, "scheduling_rules[0].priority_policy.default"),
        (Warning, "scheduling_rules[0].priority_policy.min"),
    ]),
    ("a custom resource is allowed, but not readable by the SDK", |c| {
        groups(c).push(group(&["tpu", "accel"], vec![flavor_quota("spot2", vec![quota("accel", Some(2.0))])]));
        flavors(c).push(flavor("spot2", None));
    }, &[(Warning, "resource_queues[0].resource_groups[1].covered_resources[1]")]),
    ("recycle_policy is accepted and said to do nothing", |c| {
        c.recycle_policy = Some(RecyclePolicy { rotation_interval: Some("24h".into()), max_workloads: Some(10), max_idle_duration: None })
    }, &[(Warning, "recycle_policy")]),
    ("recycle_policy follows the API's rules", |c| {
        c.recycle_policy = Some(RecyclePolicy { rotation_interval: Some(" ".into()), max_workloads: Some(0), max_idle_duration: Some("".into()) })
    }, &[
        (Error, "recycle_policy.max_workloads"),
        (Error, "recycle_policy.rotation_interval"),
        (Error, "recycle_policy.max_idle_duration"),
        (Warning, "recycle_policy"),
    ]),
    ("default above max", |c| policy(c).default = Some(101), &[(Error, "scheduling_rules[0].priority_policy.default")]),
    ("bounds may be partial", |c| *policy(c) = PriorityPolicy { default: Some(7), min: Some(7), ..Default::default() }, &[]),
    ("unknown policy names", |c| {
        let q = &mut queues(c)[0];
        q.ordering_policy = Some("lifo".into());
        q.placement_policy = Some("random".into());
        q.queueing_strategy = Some("fifo".into());
    }, &[
        (Error, "resource_queues[0].ordering_policy"),
        (Error, "resource_queues[0].placement_policy"),
        (Error, "resource_queues[0].queueing_strategy"),
        (Warning, "resource_queues[0].ordering_policy"),
        (Warning, "resource_queues[0].placement_policy"),
        (Warning, "resource_queues[0].queueing_strategy"),
    ]),
    ("known policy names", |c| {
        let q = &mut queues(c)[0];
        q.ordering_policy = Some("small_first".into());
        q.placement_policy = Some("spread".into());
        q.queueing_strategy = Some("strict_fifo".into());
    }, &[
        (Warning, "resource_queues[0].ordering_policy"),
        (Warning, "resource_queues[0].placement_policy"),
        (Warning, "resource_queues[0].queueing_strategy"),
    ]),
    ("blank cohort", |c| queues(c)[0].cohort_name = Some("".into()), &[(Error, "resource_queues[0].cohort_name")]),
    ("a cohort of two", in_cohort, &[]),
    ("a cohort of one: warned", |c| queues(c)[0].cohort_name = Some("lab".into()), &[(Warning, "resource_queues[0].cohort_name")]),
    ("a cohort needs resource_groups", |c| { in_cohort(c); queues(c)[1].resource_groups = None },
        &[(Error, "resource_queues[1].cohort_name"), (Warning, "scheduling_rules[0].resource_queue")]),
    ("empty resource_groups are none", |c| { in_cohort(c); queues(c)[1].resource_groups = Some(vec![]) },
        &[(Error, "resource_queues[1].cohort_name"), (Warning, "scheduling_rules[0].resource_queue")]),
    ("lending above nominal", |c| { in_cohort(c); spec(c).lending_limit = Some(64.5) }, &[(Error, concat!("resource_queues[0].resource_groups[0].flavors[0].resources[0]", ".lending_limit"))]),
    ("lending equal to nominal", |c| { in_cohort(c); spec(c).lending_limit = Some(64.0) }, &[]),
    ("lending with unlimited nominal (the SDK compares only when both are given)", |c| {
        in_cohort(c); spec(c).nominal_quota = None; spec(c).lending_limit = Some(8.0)
    }, &[]),
    ("limits without a cohort", |c| { spec(c).borrowing_limit = Some(2.0); spec(c).lending_limit = Some(1.0) }, &[
        (Error, "resource_queues[0].resource_groups[0].flavors[0].resources[0].borrowing_limit"),
        (Error, "resource_queues[0].resource_groups[0].flavors[0].resources[0].lending_limit"),
    ]),
    ("borrow_within_cohort any is refused", |c| { in_cohort(c); cohort_policy(c, Some(CohortPreemption::Any), Some(CohortPreemption::Any)) },
        &[(Error, "resource_queues[0].preemption.borrow_within_cohort")]),
    ("borrow_within_cohort needs a reclaim policy", |c| { in_cohort(c); cohort_policy(c, None, Some(CohortPreemption::LowerPriority)) },
        &[(Error, "resource_queues[0].preemption.borrow_within_cohort")]),
    ("borrow_within_cohort with reclaim never", |c| { in_cohort(c); cohort_policy(c, Some(CohortPreemption::Never), Some(CohortPreemption::LowerPriority)) },
        &[(Error, "resource_queues[0].preemption.borrow_within_cohort")]),
    ("borrow_within_cohort with reclaim lower_priority or any", |c| {
        in_cohort(c);
        cohort_policy(c, Some(CohortPreemption::Any), Some(CohortPreemption::LowerPriority));
        queues(c)[1].preemption = Some(PreemptionPolicy {
            reclaim_within_cohort: Some(CohortPreemption::LowerPriority),
            borrow_within_cohort: Some(CohortPreemption::LowerPriority),
            ..Default::default()
        });
    }, &[]),
    ("borrow_within_cohort never needs nothing", |c| { in_cohort(c); cohort_policy(c, None, Some(CohortPreemption::Never)) }, &[]),
    ("cohort policies without a cohort: warned, no effect", |c| cohort_policy(c, Some(CohortPreemption::Any), None),
        &[(Warning, "resource_queues[0].preemption.reclaim_within_cohort")]),
    ("a fair-sharing weight: an extension, warned", |c| { in_cohort(c); queues(c)[0].fair_sharing_weight = Some(2.0) },
        &[(Warning, "resource_queues[0].fair_sharing_weight")]),
    ("a fair-sharing weight needs a cohort", |c| queues(c)[0].fair_sharing_weight = Some(2.0),
        &[(Error, "resource_queues[0].fair_sharing_weight")]),
    ("a negative fair-sharing weight", |c| { in_cohort(c); queues(c)[0].fair_sharing_weight = Some(-1.0) },
        &[(Error, "resource_queues[0].fair_sharing_weight"), (Warning, "resource_queues[0].fair_sharing_weight")]),
    ("rule to an undefined queue", |c| rules(c).iter_mut().for_each(|r| r.resource_queue = "reserch".into()), &[
        (Warning, "resource_queues[0]"),
        (Error, "scheduling_rules[0].resource_queue"),
        (Error, "scheduling_rules[1].resource_queue"),
    ]),
    ("rule without queue", |c| rules(c)[0].resource_queue.clear(), &[(Error, "scheduling_rules[0].resource_queue")]),
    ("default is not implicit once queues exist", |c| rules(c)[1].resource_queue = "default".into(),
        &[(Error, "scheduling_rules[1].resource_queue")]),
    ("a queue may be named default", |c| { queues(c)[0].name = "default".into(); rules(c).iter_mut().for_each(|r| r.resource_queue = "default".into()) }, &[]),
    ("rules after a catch-all", |c| {
        rules(c).insert(0, rule("research", Some(vec![])));
        rules(c).push(rule("research", None));
    }, &[(Warning, "scheduling_rules[1]"), (Warning, "scheduling_rules[2]"), (Warning, "scheduling_rules[3]")]),
    ("no catch-all", |c| { rules(c).pop(); }, &[(Warning, "scheduling_rules")]),
    ("unused flavor", |c| flavors(c).push(flavor("ondemand", None)), &[(Warning, "resource_flavors[1]")]),
    ("queue no rule routes to", |c| queues(c).push(queue("batch", vec![group(&["gpu"], vec![flavor_quota("spot", vec![])])])),
        &[(Warning, "resource_queues[1]")]),
    ("no rules: unrouted queues are fine", |c| c.scheduling_rules = None, &[]),
    ("a NUL in a selector value", |c| flavors(c)[0].selector.as_mut().unwrap()[0].values = Some(vec!["sp\0t".into()]),
        &[(Error, "resource_flavors[0].selector[0].values[0]")]),
    ("a NUL in a cohort name", |c| queues(c)[0].cohort_name = Some("a\0".into()),
        &[(Warning, "resource_queues[0].cohort_name"), (Error, "resource_queues[0].cohort_name")]),
    ("no queues: rules may target the built-in default", |c| {
        c.resource_queues = None;
        c.resource_flavors = None;
        *rules(c) = vec![rule("default", None)];
    }, &[]),
    ("no queues: nothing else exists", |c| {
        c.resource_queues = Some(vec![]);
        c.resource_flavors = None;
        *rules(c) = vec![rule("research", None)];
    }, &[(Error, "scheduling_rules[0].resource_queue")]),
];

#[test]
fn every_rule_reports_the_exact_path_and_severity() {
    for (name, mutate, want) in CASES {
        let mut cfg = base();
        mutate(&mut cfg);
        let report = validate(&cfg);
        assert_eq!(found(&report), *want, "case `{name}`: {:#?}", report.problems);
    }
}

#[test]
fn seed_example_has_no_errors_and_one_warning_for_its_missing_catch_all() {
    let (cfg, report) = validate_text(SEED_EXAMPLE);
    assert_eq!(cfg, Some(seed_config()));
    assert_eq!(found(&report), [(Warning, "scheduling_rules")]);
}

#[test]
fn initial_config_has_no_problems() {
    assert_eq!(validate(&SchedulerConfig::initial()), Report::default());
    assert_eq!(validate(&SchedulerConfig::default()), Report::default());
}

#[test]
fn all_problems_are_reported_at_once_in_document_order() {
    let mut cfg = base();
    flavors(&mut cfg).push(flavor("spot", None));
    flavors(&mut cfg)[0].selector.as_mut().unwrap()[0].values = None;
    spec(&mut cfg).nominal_quota = Some(-3.0);
    groups(&mut cfg)[0].covered_resources.push("gpu".into());
    policy(&mut cfg).min = Some(500);
    let report = validate(&cfg);
    assert_eq!(
        found(&report),
        [
            (Error, "resource_flavors[0].selector[0].values"),
            (Error, "resource_flavors[1].name"),
            (Error, "resource_queues[0].resource_groups[0].covered_resources[1]"),
            (Error, format!("{QUOTA}.nominal_quota").as_str()),
            (Error, "scheduling_rules[0].priority_policy.default"),
            (Error, "scheduling_rules[0].priority_policy.min"),
        ]
    );
}

#[test]
fn messages_name_the_offending_values() {
    let message = |mutate: Mutation| {
        let mut cfg = base();
        mutate(&mut cfg);
        validate(&cfg).problems.into_iter().next().expect("a problem").message
    };
    let cases: &[(Mutation, &str)] = &[
        (|c| flavors(c).push(flavor("spot", None)), "duplicate flavor name `spot`: already used by flavor 1"),
        (|c| spec(c).nominal_quota = Some(0.0001), "allows at most 3 decimal places, but is 0.0001"),
        (|c| spec(c).nominal_quota = Some(-1.0), "must not be negative, but is -1"),
        (|c| queues(c)[0].ordering_policy = Some("lifo".into()),
            "must be one of fifo, large_resource, small_first, not `lifo`"),
        (|c| groups(c)[0].flavors[0].resources.as_mut().unwrap().push(quota("cpu", None)),
            "resource `cpu` is not among this group's covered resources [gpu]"),
        (|c| groups(c).push(group(&["cpu"], vec![flavor_quota("spot", vec![])])),
            "flavor `spot` already appears in this queue (resource group 1, flavor 1); a flavor may appear only once per queue"),
        (|c| rules(c)[1].resource_queue = "batch".into(), "no queue named `batch` is defined (defined queues: `research`)"),
        (|c| flavors(c)[0].selector = Some(vec![expr("gpu", Operator::Exists, &["a", "b"])]),
            "operator `exists` takes no values, but has [a, b]"),
        (|c| rules(c).push(rule("research", None)),
            "this rule can never match: rule 2 before it is a catch-all (it has no selector)"),
        (|c| policy(c).default = Some(101), "101 is above the maximum 100"),
        (|c| queues(c)[0].placement_policy = Some("spread".into()),
            "not readable by the anyscale SDK: a Berth extension, which the SDK drops when it reads this config"),
        (|c| groups(c)[0].covered_resources = vec!["gpu".into(), "accel".into()],
            "not readable by the anyscale SDK: it accepts only cpu, memory_gb, gpu, tpu as covered resources, so reading this config with it fails on `accel`"),
        (|c| policy(c).min = Some(-1), "not readable by the anyscale SDK: it refuses negative priorities, so reading this config with it fails on min -1"),
        (|c| { in_cohort(c); spec(c).lending_limit = Some(65.0) },
            "65 is more than the quota 64: a queue lends only its own quota"),
        (|c| spec(c).borrowing_limit = Some(1.0), "needs a cohort on the queue: only cohort peers lend and borrow"),
        (|c| { in_cohort(c); queues(c)[1].resource_groups = None },
            "queue `batch` has no resource groups (no quota to pool), so it cannot join cohort `lab`"),
        (|c| { in_cohort(c); cohort_policy(c, None, Some(CohortPreemption::LowerPriority)) },
            "`lower_priority` needs reclaim within cohort `lower_priority` or `any` (it is omitted)"),
        (|c| { in_cohort(c); cohort_policy(c, Some(CohortPreemption::Any), Some(CohortPreemption::Any)) },
            "must be one of never, lower_priority, not `any`"),
        (|c| queues(c)[0].cohort_name = Some("lab".into()),
            "cohort `lab` has only this queue: there is no peer to borrow from or lend to"),
    ];
    for (mutate, want) in cases {
        assert_eq!(message(*mutate), *want);
    }
}

#[test]
fn three_decimals_check_tolerates_binary_rounding() {
    let cases = [
        (64.0, true),
        (0.5, true),
        (1.125, true),
        (0.1 + 0.2, true),
        (1.005, true),
        (2.675, true),
        (1e12 + 0.001, true),
        (1e15, true),
        (0.0001, false),
        (1.2345, false),
        (1e-9, false),
        (0.0015, false),
    ];
    for (x, want) in cases {
        assert_eq!(has_at_most_3_decimals(x), want, "{x}");
    }
}

fn node(name: &str, market: &str, gpu: f64) -> NodeInfo {
    NodeInfo {
        name: name.into(),
        labels: [("market".to_string(), market.to_string())].into(),
        capacity: [("gpu".to_string(), gpu), ("cpu".to_string(), 32.0)].into(),
    }
}

#[test]
fn quotas_above_node_capacity_are_warned_about() {
    let nodes = [node("a", "spot", 8.0), node("b", "spot", 8.0), node("c", "ondemand", 100.0)];
    let report = validate_with_nodes(&base(), &nodes);
    assert_eq!(found(&report), [(Warning, format!("{QUOTA}.nominal_quota").as_str())]);
    assert_eq!(
        report.problems[0].message,
        "quota 64 gpu is more than the 16 gpu that the 2 nodes of flavor `spot` have in total"
    );
    let mut fits = base();
    spec(&mut fits).nominal_quota = Some(16.0);
    assert_eq!(validate_with_nodes(&fits, &nodes), Report::default());
    // Without node information nothing is said about capacity.
    assert_eq!(validate(&base()), Report::default());
}

#[test]
fn a_flavor_matching_no_node_is_warned_about_once() {
    let nodes = [node("c", "ondemand", 100.0)];
    let report = validate_with_nodes(&base(), &nodes);
    assert_eq!(found(&report), [(Warning, "resource_flavors[0].selector")]);
    assert!(report.problems[0].message.contains("`spot` does not match the only known node"));
    let mut no_selector = base();
    flavors(&mut no_selector)[0].selector = None;
    assert_eq!(found(&validate_with_nodes(&no_selector, &[])), [(Warning, "resource_flavors[0]")]);
}

#[test]
fn validate_text_reports_parse_problems_alone() {
    let (cfg, report) = validate_text("resource_flavors:\n  - name: a\n    bogus: 1\n");
    assert_eq!(cfg, None);
    assert_eq!(found(&report), [(Error, "resource_flavors[0].bogus")]);
    let (cfg, report) = validate_text("{\"resource_flavors\": [{\"name\": \"a\"}]}");
    assert!(cfg.is_some());
    assert_eq!(found(&report), [(Warning, "resource_flavors[0]")]);
}

#[test]
fn node_info_is_serde_friendly() {
    let n: NodeInfo = serde_json::from_str(r#"{"name": "n1", "capacity": {"gpu": 8}}"#).unwrap();
    assert_eq!(n.capacity["gpu"], 8.0);
    assert!(n.labels.is_empty());
}

#[test]
fn problems_name_their_place_in_words() {
    let mut cfg = base();
    spec(&mut cfg).nominal_quota = Some(-1.0);
    let report = validate(&cfg);
    let p = &report.problems[0];
    assert_eq!(p.location(), "queue research › resource group 1 › flavor spot › gpu quota");
    assert_eq!(p.path, format!("{QUOTA}.nominal_quota"));
    assert_eq!(
        p.to_string(),
        format!("error: {QUOTA}.nominal_quota: must not be negative, but is -1 (queue research › resource group 1 › flavor spot › gpu quota)")
    );
}

#[test]
fn a_queue_that_covers_nothing_is_called_dead() {
    let mut cfg = base();
    queues(&mut cfg)[0].resource_groups = Some(vec![]);
    let report = validate(&cfg);
    let said: Vec<(String, &str)> = report.problems.iter().map(|p| (p.location(), p.message.as_str())).collect();
    assert!(said.contains(&(
        "queue research".into(),
        "queue `research` covers no resource (it has no resource group), so every job routed to it is rejected"
    )), "{said:?}");
    assert!(said.contains(&(
        "rule 1 › target queue".into(),
        "queue `research` covers no resource, so every job this rule routes is rejected"
    )), "{said:?}");
}
