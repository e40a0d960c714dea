//! Where a problem is, in words a person uses: a field path such as
//! `resource_queues[1].resource_groups[0].flavors[0].resources[0].nominal_quota` becomes
//! the steps `queue vision`, `flavor team-cpu`, `cpu quota`.
//!
//! The steps are read off the config itself (item names, rule numbers, resource names), by
//! walking the path's keys and indices through it; the path stays on the problem for tools
//! and for jumping to the field.

use serde_json::Value;

use super::model::SchedulerConfig;

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// The steps of `path` (`a.b[2].c`); `None` when it is not in that form.
fn steps(path: &str) -> Option<Vec<Step>> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (key, mut rest) = part.split_at(part.find('[').unwrap_or(part.len()));
        if !key.is_empty() {
            out.push(Step::Key(key.to_string()));
        }
        while let Some(inner) = rest.strip_prefix('[') {
            let end = inner.find(']')?;
            out.push(Step::Index(inner[..end].parse().ok()?));
            rest = &inner[end + 1..];
        }
    }
    Some(out)
}

/// The place of `path` in `cfg` as steps for a person, e.g. `["queue vision", "flavor
/// team-cpu", "cpu quota"]`; empty for the whole document or a path it cannot follow.
pub fn describe(cfg: &SchedulerConfig, path: &str) -> Vec<String> {
    serde_json::to_value(cfg).map(|root| describe_in(&root, path)).unwrap_or_default()
}

/// [`describe`] in a config already turned into JSON (to describe many paths at once).
pub fn describe_in(root: &Value, path: &str) -> Vec<String> {
    let Some(steps) = steps(path) else { return Vec::new() };
    let mut out = Vec::new();
    let mut at = root;
    let mut i = 0;
    while i < steps.len() {
        match (&steps[i], steps.get(i + 1)) {
            (Step::Key(list), Some(Step::Index(n))) => {
                let item = at.get(list).and_then(|l| l.get(*n)).unwrap_or(&Value::Null);
                let next = steps.get(i + 2);
                let (word, merged) = item_word(list, *n, item, next);
                out.push(word);
                at = item;
                i += if merged { 3 } else { 2 };
            }
            (Step::Key(key), _) => {
                let merged = merge_field(key, steps.get(i + 1));
                out.push(merged.clone().unwrap_or_else(|| field(key).to_string()));
                at = at.get(key).unwrap_or(&Value::Null);
                i += if merged.is_some() { 2 } else { 1 };
            }
            (Step::Index(n), _) => {
                out.push(format!("item {}", n + 1));
                at = at.get(*n).unwrap_or(&Value::Null);
                i += 1;
            }
        }
    }
    out
}

/// The word for item `n` of list `list`, and whether it took in the field after it
/// (`resources[0].nominal_quota` is one step: `cpu quota`).
fn item_word(list: &str, n: usize, item: &Value, next: Option<&Step>) -> (String, bool) {
    let name = item.get("name").and_then(Value::as_str).filter(|s| !s.trim().is_empty());
    let number = n + 1;
    match (list, name) {
        ("resources", Some(res)) => match next {
            Some(Step::Key(k)) if k != "name" => (format!("{res} {}", field(k)), true),
            _ => (format!("{res} quota"), false),
        },
        ("resources", None) => (format!("quota {number}"), false),
        ("covered_resources", _) => match item.as_str().filter(|s| !s.trim().is_empty()) {
            Some(r) => (format!("covered resource {r}"), false),
            None => (format!("covered resource {number}"), false),
        },
        ("scheduling_rules" | "resource_groups" | "selector" | "values", _) | (_, None) => {
            (format!("{} {number}", item_noun(list)), false)
        }
        (list, Some(name)) => (format!("{} {name}", item_noun(list)), false),
    }
}

/// `priority_policy.default` reads as one step: `default priority`.
fn merge_field(key: &str, next: Option<&Step>) -> Option<String> {
    match (key, next) {
        ("priority_policy", Some(Step::Key(k))) => Some(match k.as_str() {
            "default" => "default priority".into(),
            "min" => "minimum priority".into(),
            "max" => "maximum priority".into(),
            other => field(other).to_string(),
        }),
        ("preemption", Some(Step::Key(k))) => Some(format!("preemption {}", field(k))),
        _ => None,
    }
}

/// What one item of a list is called.
pub(crate) fn item_noun(list: &str) -> &str {
    match list {
        "resource_flavors" | "flavors" => "flavor",
        "resource_queues" => "queue",
        "scheduling_rules" => "rule",
        "resource_groups" => "resource group",
        "selector" => "condition",
        "covered_resources" => "covered resource",
        "values" => "value",
        "resources" => "quota",
        other => other,
    }
}

/// A field's name as a person says it.
pub(crate) fn field(key: &str) -> &str {
    match key {
        "nominal_quota" => "quota",
        "borrowing_limit" => "borrowing limit",
        "lending_limit" => "lending limit",
        "resource_queue" => "target queue",
        "covered_resources" => "covered resources",
        "resource_groups" => "resource groups",
        "resource_flavors" => "flavors",
        "resource_queues" => "queues",
        "scheduling_rules" => "rules",
        "cohort_name" => "cohort",
        "fair_sharing_weight" => "fair-sharing weight",
        "ordering_policy" => "ordering policy",
        "placement_policy" => "placement policy",
        "queueing_strategy" => "queueing strategy",
        "priority_policy" => "priority policy",
        "within_resource_queue" => "within the queue",
        "reclaim_within_cohort" => "reclaim within cohort",
        "borrow_within_cohort" => "borrow within cohort",
        "recycle_policy" => "recycle policy",
        "max_workloads" => "max workloads",
        "rotation_interval" => "rotation interval",
        "max_idle_duration" => "max idle duration",
        "on_violation" => "on violation",
        "advanced_instance_config" => "advanced instance config",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_auto as parse;

    fn cfg() -> SchedulerConfig {
        parse(
            "resource_flavors:\n- name: team-cpu\n  selector:\n  - key: pool\n    operator: in\n    values: [cpu]\n\
             resource_queues:\n- name: research\n- name: vision\n  resource_groups:\n  - covered_resources: [cpu, gpu]\n    flavors:\n    - name: team-cpu\n      resources:\n      - name: cpu\n        nominal_quota: 4\n\
             scheduling_rules:\n- resource_queue: vision\n  priority_policy:\n    default: 3\n",
        )
        .expect("parses")
    }

    #[test]
    fn paths_read_as_names_and_labels() {
        let cases = [
            ("resource_queues[1].resource_groups[0].flavors[0].resources[0].nominal_quota", vec!["queue vision", "resource group 1", "flavor team-cpu", "cpu quota"]),
            ("resource_queues[1].resource_groups[0].flavors[0].resources[0].name", vec!["queue vision", "resource group 1", "flavor team-cpu", "cpu quota", "name"]),
            ("resource_queues[1].resource_groups[0].covered_resources[1]", vec!["queue vision", "resource group 1", "covered resource gpu"]),
            ("resource_queues[0].name", vec!["queue research", "name"]),
            ("resource_flavors[0].selector[0].values", vec!["flavor team-cpu", "condition 1", "values"]),
            ("scheduling_rules[0].priority_policy.default", vec!["rule 1", "default priority"]),
            ("scheduling_rules[0].resource_queue", vec!["rule 1", "target queue"]),
            ("scheduling_rules", vec!["rules"]),
            ("", vec![]),
        ];
        for (path, want) in cases {
            assert_eq!(describe(&cfg(), path), want, "{path}");
        }
    }

    #[test]
    fn an_item_without_a_name_is_numbered_and_a_broken_path_is_no_place() {
        let mut c = cfg();
        c.resource_queues.as_mut().expect("queues")[0].name = " ".into();
        assert_eq!(describe(&c, "resource_queues[0].name"), ["queue 1", "name"]);
        assert_eq!(describe(&c, "resource_queues[0"), Vec::<String>::new());
        assert_eq!(describe(&c, "resource_queues[9].name"), ["queue 10", "name"]);
    }
}
