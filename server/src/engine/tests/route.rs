//! Table cases for compile, routing, priority policy and submit-time rejection.

use app::config::{OnViolation, Operator};

use super::fixtures::*;
use crate::engine::*;

fn routed(queue: &str, rule: Option<usize>, priority: i64) -> Result<Routed, String> {
    Ok(Routed { queue: queue.into(), rule_index: rule, priority })
}

fn rejected(reason: &str) -> Result<Routed, String> {
    Err(reason.into())
}

/// A rejection's sentence (what the cases spell out; its code is a metric's label).
fn said<T>(r: Result<T, Rejection>) -> Result<T, String> {
    r.map_err(|r| r.reason)
}

#[test]
fn routing_first_match_wins() {
    let c = config()
        .flavor("local", &[])
        .queue(queue("vision"))
        .queue(queue("research"))
        .queue(queue("batch"))
        .rule(rule("vision").when(is_in("team", &["vision"])))
        .rule(rule("research").when(is_in("team", &["vision", "nlp"])))
        .rule(rule("batch").when(expr("tier", Operator::NotIn, &["prod"])))
        .compile();
    let cases: Vec<(&[(&str, &str)], Result<Routed, String>)> = vec![
        (&[("team", "vision")], routed("vision", Some(0), 0)),
        (&[("team", "nlp")], routed("research", Some(1), 0)),
        // not_in matches a job without the key, as Kubernetes selectors do.
        (&[], routed("batch", Some(2), 0)),
        (&[("team", "ops"), ("tier", "dev")], routed("batch", Some(2), 0)),
        (&[("team", "ops"), ("tier", "prod")], rejected("no scheduling rule matches labels team=ops, tier=prod")),
    ];
    for (l, want) in cases {
        assert_eq!(said(route(&c, &labels(l), None)), want, "labels {l:?}");
    }
}

#[test]
fn catch_all_and_no_rules() {
    let c = config()
        .queue(queue("vision"))
        .queue(queue("rest"))
        .rule(rule("vision").when(is_in("team", &["vision"])))
        .rule(rule("rest"))
        .compile();
    assert_eq!(said(route(&c, &labels(&[("team", "x")]), Some(3))), routed("rest", Some(1), 3));
    let none = config().compile();
    assert_eq!(said(route(&none, &labels(&[("team", "x")]), None)), routed("default", None, 0));
    assert_eq!(said(route(&none, &labels(&[]), Some(7))), routed("default", None, 7));
    let no_match = config().queue(queue("vision")).rule(rule("vision").when(is_in("team", &["vision"]))).compile();
    assert_eq!(said(route(&no_match, &labels(&[]), None)), rejected("no scheduling rule matches labels (none)"));
}

#[test]
fn priority_policy() {
    let with = |default: Option<i64>, min: Option<i64>, max: Option<i64>, on: Option<OnViolation>| {
        config().queue(queue("q")).rule(rule("q").priority(default, min, max, on)).compile()
    };
    let cases = [
        ("default applies when none given", with(Some(5), Some(0), Some(10), None), None, routed("q", Some(0), 5)),
        ("requested within bounds", with(Some(5), Some(0), Some(10), None), Some(9), routed("q", Some(0), 9)),
        (
            "above max, on_violation omitted: rejected",
            with(Some(5), Some(0), Some(10), None),
            Some(12),
            rejected("priority 12 is above the maximum 10 allowed by scheduling_rules[0] (queue q)"),
        ),
        (
            "below min, reject",
            with(None, Some(3), None, Some(OnViolation::Reject)),
            Some(1),
            rejected("priority 1 is below the minimum 3 allowed by scheduling_rules[0] (queue q)"),
        ),
        ("above max, force_update: clamped", with(None, Some(0), Some(10), Some(OnViolation::ForceUpdate)), Some(12), routed("q", Some(0), 10)),
        ("below min, force_update: clamped", with(None, Some(3), Some(10), Some(OnViolation::ForceUpdate)), Some(-4), routed("q", Some(0), 3)),
        ("no default anywhere: 0", with(None, None, None, None), None, routed("q", Some(0), 0)),
        ("no default, 0 below min: clamped, not rejected", with(None, Some(2), None, None), None, routed("q", Some(0), 2)),
    ];
    for (name, c, p, want) in cases {
        assert_eq!(said(route(&c, &labels(&[]), p)), want, "{name}");
    }
}

#[test]
fn submit_time_rejection() {
    let c = config()
        .flavor("spot", &[("market", "spot")])
        .flavor("on-demand", &[("market", "on-demand")])
        .queue(queue("research").group(&["gpu", "cpu"], &[("spot", &[("gpu", 64)]), ("on-demand", &[])]))
        .compile();
    let nodes = vec![
        node("spot-1").label("market", "spot").cap(&[("gpu", 8), ("cpu", 32)]),
        node("od-1").label("market", "on-demand").cap(&[("gpu", 4), ("cpu", 64)]),
        node("other").label("market", "other").cap(&[("gpu", 16), ("cpu", 128)]),
    ];
    let ok: Result<(), String> = Ok(());
    let no = |r: &str| -> Result<(), String> { Err(r.into()) };
    let cases = [
        ("fits one node", Resources::units(&[("gpu", 8), ("cpu", 32)]), ok.clone()),
        ("fits another flavor's node", Resources::units(&[("gpu", 2), ("cpu", 64)]), ok.clone()),
        ("above quota is not a rejection", Resources::units(&[("gpu", 8)]), ok),
        ("nothing requested (seed 001)", Resources::units(&[("gpu", 0)]), no("must request at least one resource")),
        (
            "negative",
            Resources::new([("cpu", Milli(-1000))]),
            no("requested cpu must not be negative (got -1)"),
        ),
        ("uncovered resource", Resources::units(&[("gpu", 1), ("memory_gb", 4)]), no("queue research has no resource group covering memory_gb")),
        (
            "bigger than any matching node; a bigger node of another flavor does not count",
            Resources::units(&[("gpu", 12), ("cpu", 64)]),
            no("requests cpu 64, gpu 12, more than any node of queue research's flavors can hold; \
                the biggest, od-1, has cpu 64, gpu 4"),
        ),
    ];
    for (name, req, want) in cases {
        assert_eq!(said(check_submittable(&c, &nodes, "research", &req)), want, "{name}");
    }
    assert_eq!(
        said(check_submittable(&c, &nodes, "ghost", &Resources::units(&[("gpu", 1)]))),
        no("queue ghost is not defined")
    );
    assert_eq!(
        said(check_submittable(&c, &nodes[2..], "research", &Resources::units(&[("gpu", 1)]))),
        no("no node matches the flavors of queue research")
    );
}

#[test]
fn compile_refuses_what_the_engine_cannot_run() {
    let err = |c: app::config::SchedulerConfig| compile(&c).map(|_| ()).unwrap_err().to_string();
    let cases = [
        (config().flavor("a", &[]).flavor("a", &[]).build(), "resource_flavors[1].name: flavor a is defined twice"),
        (config().queue(queue("q")).queue(queue("q")).build(), "resource_queues[1].name: queue q is defined twice"),
        (
            config().queue(queue("q").group(&["cpu"], &[("nope", &[])])).build(),
            "resource_queues[0].resource_groups[0].flavors[0].name: flavor nope is not defined",
        ),
        (config().queue(queue("q")).rule(rule("ghost")).build(), "scheduling_rules[0].resource_queue: queue ghost is not defined"),
        (
            config().queue(queue("q").ordering("random")).build(),
            "resource_queues[0].ordering_policy: unknown ordering_policy random; expected one of fifo, large_resource, small_first",
        ),
        (
            config().flavor("f", &[]).queue(queue("q").group_f(&["cpu"], &[("f", vec![("cpu", Some(-1.0))])])).build(),
            "resource_queues[0].resource_groups[0].flavors[0].resources[0].nominal_quota: must be a number ≥ 0 with at most 3 decimals",
        ),
        (
            config().flavor("f", &[]).queue(queue("q").group_f(&["cpu"], &[("f", vec![("cpu", Some(0.0001))])])).build(),
            "resource_queues[0].resource_groups[0].flavors[0].resources[0].nominal_quota: must be a number ≥ 0 with at most 3 decimals",
        ),
        (
            config().flavor("f", &[]).flavor("g", &[]).queue(queue("q").group(&["cpu"], &[("f", &[])]).group(&["cpu"], &[("g", &[])])).build(),
            "resource_queues[0].resource_groups[1].covered_resources[0]: resource cpu is covered by more than one resource group of queue q",
        ),
        (
            config().flavor("f", &[]).queue(queue("q").group(&["cpu"], &[("f", &[("gpu", 1)])])).build(),
            "resource_queues[0].resource_groups[0].flavors[0].resources[0].name: resource gpu is not among the group's covered_resources",
        ),
        (
            config().queue(queue("q")).rule(rule("q").priority(None, Some(5), Some(1), None)).build(),
            "scheduling_rules[0].priority_policy: min 5 is greater than max 1",
        ),
    ];
    for (c, want) in cases {
        assert_eq!(err(c), want);
    }
}

#[test]
fn compile_keeps_a_configured_default_queue_and_reads_quotas_exactly() {
    let c = config()
        .flavor("local", &[])
        .queue(queue("default").group_f(&["cpu"], &[("local", vec![("cpu", Some(2.5))])]))
        .compile();
    assert_eq!(c.queue_names().map(|n| n.to_string()).collect::<Vec<_>>(), ["default"]);
    assert_eq!(c.nominal_quota("default", "local", "cpu"), Some(Some(Milli(2500))));
    assert_eq!(c.nominal_quota("default", "local", "gpu"), None);
    // The initial config of a fresh install compiles: unlimited local queue.
    let initial = compile(&app::config::SchedulerConfig::initial()).unwrap();
    assert_eq!(initial.nominal_quota("default", "local", "gpu"), Some(None));
}
