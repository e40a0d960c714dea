use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::config::fixtures::*;
use crate::config::model::*;

fn changes(old: &SchedulerConfig, new: &SchedulerConfig) -> Vec<(Section, ChangeKind, String)> {
    diff(old, new).changes.into_iter().map(|c| (c.section, c.kind, c.path)).collect()
}

fn two_flavors() -> SchedulerConfig {
    let mut cfg = seed_config();
    cfg.resource_flavors.as_mut().unwrap().push(flavor("ondemand", None));
    let q = &mut cfg.resource_queues.as_mut().unwrap()[0];
    q.resource_groups.as_mut().unwrap()[0].flavors.push(flavor_quota("ondemand", vec![quota("gpu", Some(8.0))]));
    cfg
}

fn three_rules() -> SchedulerConfig {
    let mut cfg = seed_config();
    let rules = cfg.scheduling_rules.as_mut().unwrap();
    rules.push(rule("research", Some(vec![expr("team", Operator::In, &["ml"])])));
    rules.push(rule("research", None));
    cfg
}

#[test]
fn identical_configs_have_no_changes() {
    let d = diff(&seed_config(), &seed_config());
    assert!(d.identical);
    assert!(d.changes.is_empty());
    assert_eq!(d.unified, "");
    assert!(diff(&SchedulerConfig::default(), &SchedulerConfig::default()).identical);
}

#[test]
fn a_changed_quota_has_its_named_path_old_new_and_a_sentence() {
    let mut new = seed_config();
    new.resource_queues.as_mut().unwrap()[0].resource_groups.as_mut().unwrap()[0].flavors[0]
        .resources
        .as_mut()
        .unwrap()[0]
        .nominal_quota = Some(32.0);
    let d = diff(&seed_config(), &new);
    assert!(!d.identical);
    assert_eq!(d.changes.len(), 1);
    let c = &d.changes[0];
    assert_eq!((c.section, c.kind), (Section::Queues, ChangeKind::Changed));
    assert_eq!(c.path, "resource_queues[research].resource_groups[0].flavors[spot].resources[gpu].nominal_quota");
    assert_eq!((c.old.clone(), c.new.clone()), (Some(json!(64.0)), Some(json!(32.0))));
    assert_eq!(c.summary, "queue research: gpu quota on flavor spot 64 → 32");
    assert!(d.unified.starts_with("--- version A\n+++ version B\n@@ "), "{}", d.unified);
    assert!(
        d.unified.contains("\n-                nominal_quota: 64\n+                nominal_quota: 32\n"),
        "{}",
        d.unified
    );
}

#[test]
fn unified_diff_uses_the_given_labels_and_three_lines_of_context() {
    let mut new = seed_config();
    new.resource_flavors.as_mut().unwrap()[0].name = "spot2".into();
    let d = diff_labeled(&seed_config(), &new, "version 3", "version 4");
    let want = "\
--- version 3
+++ version 4
@@ -1,5 +1,5 @@
 resource_flavors:
-  - name: spot
+  - name: spot2
     selector:
       - key: market
         operator: in
";
    assert_eq!(d.unified, want);
}

#[test]
fn flavors_added_and_removed_whole() {
    let cases = [
        (
            seed_config(),
            two_flavors(),
            ChangeKind::Added,
            "flavor ondemand added",
            "queue research: flavor ondemand added to resource group 1",
        ),
        (
            two_flavors(),
            seed_config(),
            ChangeKind::Removed,
            "flavor ondemand removed",
            "queue research: flavor ondemand removed from resource group 1",
        ),
    ];
    for (old, new, kind, flavor_summary, queue_summary) in cases {
        let d = diff(&old, &new);
        let got: Vec<_> = d.changes.iter().map(|c| (c.section, c.kind, c.path.as_str(), c.summary.as_str())).collect();
        assert_eq!(
            got,
            [
                (Section::Flavors, kind, "resource_flavors[ondemand]", flavor_summary),
                (
                    Section::Queues,
                    kind,
                    "resource_queues[research].resource_groups[0].flavors[ondemand]",
                    queue_summary
                ),
            ]
        );
        let whole = json!({"name": "ondemand"});
        let c = &d.changes[0];
        assert_eq!(if kind == ChangeKind::Added { c.new.as_ref() } else { c.old.as_ref() }, Some(&whole));
    }
}

#[test]
fn flavor_preference_reorder_is_one_reordered_change() {
    let old = two_flavors();
    let mut new = old.clone();
    new.resource_queues.as_mut().unwrap()[0].resource_groups.as_mut().unwrap()[0].flavors.reverse();
    let d = diff(&old, &new);
    assert_eq!(d.changes.len(), 1, "{:#?}", d.changes);
    let c = &d.changes[0];
    assert_eq!(
        (c.kind, c.path.as_str()),
        (ChangeKind::Reordered, "resource_queues[research].resource_groups[0].flavors")
    );
    assert_eq!((c.old.clone(), c.new.clone()), (Some(json!(["spot", "ondemand"])), Some(json!(["ondemand", "spot"]))));
    assert_eq!(c.summary, "queue research: flavor preference in resource group 1 spot, ondemand → ondemand, spot");
}

#[test]
fn a_pure_rule_reorder_is_shown_as_moves() {
    let old = three_rules();
    let mut new = old.clone();
    new.scheduling_rules.as_mut().unwrap().swap(0, 1);
    let d = diff(&old, &new);
    assert_eq!(d.changes.len(), 1, "{:#?}", d.changes);
    let c = &d.changes[0];
    assert_eq!((c.section, c.kind), (Section::Rules, ChangeKind::Reordered));
    // Swapping neighbours moves one of them; which one is the diff algorithm's (fixed) choice.
    assert_eq!(c.path, "scheduling_rules[0]");
    assert_eq!((c.old.clone(), c.new.clone()), (Some(json!(1)), Some(json!(0))));
    assert_eq!(c.summary, "rule (team = ml → research) moved from position 2 to 1");

    // Rotating all three moves one rule, not three.
    let mut rotated = old.clone();
    rotated.scheduling_rules.as_mut().unwrap().rotate_right(1);
    let d = diff(&old, &rotated);
    assert_eq!(changes(&old, &rotated), [(Section::Rules, ChangeKind::Reordered, "scheduling_rules[0]".into())]);
    assert_eq!((d.changes[0].old.clone(), d.changes[0].new.clone()), (Some(json!(2)), Some(json!(0))));
}

#[test]
fn a_rule_edited_in_place_is_changed_field_by_field() {
    let old = three_rules();
    let mut new = old.clone();
    let r = &mut new.scheduling_rules.as_mut().unwrap()[1];
    r.selector.as_mut().unwrap()[0].values = Some(vec!["ml".into(), "cv".into()]);
    r.priority_policy = Some(PriorityPolicy { max: Some(10), ..Default::default() });
    let d = diff(&old, &new);
    let got: Vec<_> = d.changes.iter().map(|c| (c.kind, c.path.as_str(), c.summary.as_str())).collect();
    assert_eq!(
        got,
        [
            (
                ChangeKind::Changed,
                "scheduling_rules[1].selector[0].values",
                "rule 2 (team in [ml, cv] → research): condition 1 values [ml] → [ml, cv]"
            ),
            (
                ChangeKind::Added,
                "scheduling_rules[1].priority_policy",
                "rule 2 (team in [ml, cv] → research): priority policy added"
            ),
        ]
    );
    assert_eq!(d.changes[0].old, Some(json!(["ml"])));
}

#[test]
fn rules_added_and_removed_around_unchanged_ones() {
    let old = three_rules();
    let mut new = old.clone();
    let rules = new.scheduling_rules.as_mut().unwrap();
    rules.remove(1);
    rules.insert(0, rule("research", Some(vec![expr("urgent", Operator::Exists, &[])])));
    let d = diff(&old, &new);
    let got: Vec<_> = d.changes.iter().map(|c| (c.kind, c.path.as_str(), c.summary.as_str())).collect();
    assert_eq!(
        got,
        [
            (ChangeKind::Added, "scheduling_rules[0]", "rule 1 (urgent exists → research) added"),
            (ChangeKind::Removed, "scheduling_rules[1]", "rule 2 (team = ml → research) removed"),
        ]
    );
}

#[test]
fn field_changes_in_queues_and_flavors() {
    let old = seed_config();
    let mut new = old.clone();
    let q = &mut new.resource_queues.as_mut().unwrap()[0];
    q.preemption = None;
    q.cohort_name = Some("lab".into());
    q.resource_groups.as_mut().unwrap()[0].covered_resources.push("cpu".into());
    new.resource_flavors.as_mut().unwrap()[0].selector.as_mut().unwrap()[0].operator = Operator::NotIn;
    let d = diff(&old, &new);
    let got: Vec<_> = d.changes.iter().map(|c| (c.kind, c.path.as_str(), c.summary.as_str())).collect();
    assert_eq!(
        got,
        [
            (
                ChangeKind::Changed,
                "resource_flavors[spot].selector[0].operator",
                "flavor spot: condition 1 operator in → not_in"
            ),
            (ChangeKind::Removed, "resource_queues[research].preemption", "queue research: preemption removed"),
            (
                ChangeKind::Changed,
                "resource_queues[research].resource_groups[0].covered_resources",
                "queue research: resource group 1 covered resources [gpu] → [gpu, cpu]"
            ),
            (ChangeKind::Added, "resource_queues[research].cohort_name", "queue research: cohort added (lab)"),
        ]
    );
}

#[test]
fn sections_appearing_and_queue_order() {
    let old = SchedulerConfig::default();
    let new = SchedulerConfig { resource_flavors: Some(vec![]), ..Default::default() };
    assert_eq!(changes(&old, &new), [(Section::Flavors, ChangeKind::Added, "resource_flavors".into())]);
    assert_eq!(diff(&old, &new).changes[0].summary, "resource_flavors added (empty)");

    let old =
        SchedulerConfig { resource_queues: Some(vec![queue("a", vec![]), queue("b", vec![])]), ..Default::default() };
    let mut new = old.clone();
    new.resource_queues.as_mut().unwrap().reverse();
    new.scheduling_rules = Some(vec![rule("a", None)]);
    let d = diff(&old, &new);
    let got: Vec<_> = d.changes.iter().map(|c| (c.kind, c.path.as_str(), c.summary.as_str())).collect();
    assert_eq!(
        got,
        [
            (ChangeKind::Reordered, "resource_queues", "queue order: a, b → b, a"),
            (ChangeKind::Added, "scheduling_rules[0]", "rule 1 (any job → a) added"),
        ]
    );
}

#[test]
fn quota_limits_read_as_unlimited_when_absent() {
    let old = seed_config();
    let mut new = old.clone();
    let spec = &mut new.resource_queues.as_mut().unwrap()[0].resource_groups.as_mut().unwrap()[0].flavors[0]
        .resources
        .as_mut()
        .unwrap()[0];
    spec.nominal_quota = None;
    spec.borrowing_limit = Some(8.5);
    let summaries: Vec<_> = diff(&old, &new).changes.into_iter().map(|c| c.summary).collect();
    assert_eq!(
        summaries,
        [
            "queue research: gpu quota on flavor spot 64 → unlimited",
            "queue research: gpu borrowing limit on flavor spot unlimited → 8.5",
        ]
    );
}

#[test]
fn line_diff_numbers_lines_from_one() {
    let lines = line_diff("a\nb\nc\n", "a\nx\nc\n");
    let got: Vec<_> = lines.iter().map(|l| (l.tag, l.old_line, l.new_line, l.text.as_str())).collect();
    assert_eq!(
        got,
        [
            (LineTag::Equal, Some(1), Some(1), "a"),
            (LineTag::Delete, Some(2), None, "b"),
            (LineTag::Insert, None, Some(2), "x"),
            (LineTag::Equal, Some(3), Some(3), "c"),
        ]
    );
}

#[test]
fn diff_types_serialize_in_snake_case() {
    let d = diff(&seed_config(), &two_flavors());
    let v = serde_json::to_value(&d).unwrap();
    assert_eq!(v["changes"][0]["section"], "flavors");
    assert_eq!(v["changes"][0]["kind"], "added");
    assert_eq!(serde_json::to_value(LineTag::Insert).unwrap(), "insert");
    let back: ConfigDiff = serde_json::from_value(v).unwrap();
    assert_eq!(back, d);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn diff_is_empty_exactly_when_configs_are_equal(a in config_strategy(), b in config_strategy()) {
        let (a, b) = (finite(a), finite(b));
        let same = diff(&a, &a);
        prop_assert!(same.identical && same.changes.is_empty());
        let d = diff(&a, &b);
        prop_assert_eq!(d.identical, a == b);
        prop_assert_eq!(d.changes.is_empty(), a == b);
        prop_assert_eq!(d.unified.is_empty(), a == b);
    }

    #[test]
    fn shuffled_rules_are_only_reordered(rules in proptest::collection::vec(
        (0..3usize, 0..3usize).prop_map(|(q, k)| rule(["a", "b", "c"][q], (k > 0).then(|| vec![expr("team", Operator::In, &[["x", "y"][k - 1]])]))),
        0..6,
    ).prop_flat_map(|rules| (Just(rules.clone()), Just(rules).prop_shuffle()))) {
        let (old, new) = rules;
        let wrap = |r: Vec<SchedulingRule>| SchedulerConfig { scheduling_rules: Some(r), ..Default::default() };
        let d = diff(&wrap(old.clone()), &wrap(new.clone()));
        prop_assert!(d.changes.iter().all(|c| c.kind == ChangeKind::Reordered), "{:#?}", d.changes);
        prop_assert_eq!(d.changes.is_empty(), old == new);
    }
}

/// `cfg` with infinite quotas replaced: JSON (and so a change's old/new) has no infinity.
fn finite(mut cfg: SchedulerConfig) -> SchedulerConfig {
    let fix = |x: &mut Option<f64>| {
        if x.is_some_and(|v| !v.is_finite()) {
            *x = Some(1.0);
        }
    };
    for q in cfg.resource_queues.iter_mut().flatten() {
        for g in q.resource_groups.iter_mut().flatten() {
            for spec in g.flavors.iter_mut().flat_map(|f| f.resources.iter_mut().flatten()) {
                fix(&mut spec.nominal_quota);
                fix(&mut spec.borrowing_limit);
                fix(&mut spec.lending_limit);
            }
        }
    }
    cfg
}
