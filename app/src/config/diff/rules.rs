//! Rules have no names, and their order is their meaning (first match wins), so they are
//! compared by content and position: unchanged rules (a longest common subsequence), moved
//! rules (identical content elsewhere), rules edited in place (paired by position within an
//! edited stretch) and the rest, added or removed.

use serde_json::Value;
use similar::{capture_diff_slices, Algorithm, DiffTag};

use super::{tree, ChangeKind, RawChange, Seg};
use crate::config::model::{Operator, SchedulerConfig, SchedulingRule};

/// Old and new indices of one stretch the two rule lists disagree on.
#[derive(Default)]
struct Stretch {
    old: Vec<usize>,
    new: Vec<usize>,
}

pub(super) fn section(
    old_cfg: &SchedulerConfig,
    new_cfg: &SchedulerConfig,
    old: Option<&Value>,
    new: Option<&Value>,
    out: &mut Vec<RawChange>,
) {
    let empty = |v: Option<&Value>| v.and_then(Value::as_array).is_none_or(Vec::is_empty);
    // An absent section vs. an empty one: the section itself changed, there is no rule to show.
    if empty(old) && empty(new) {
        return tree::section("scheduling_rules", old, new, out);
    }
    let (a, b) = (list(old), list(new));
    let (old_rules, new_rules) = (old_cfg.rules(), new_cfg.rules());
    let key = |v: &Value| v.to_string();
    let (old_keys, new_keys): (Vec<String>, Vec<String>) = (a.iter().map(key).collect(), b.iter().map(key).collect());

    let mut stretches: Vec<Stretch> = capture_diff_slices(Algorithm::Myers, &old_keys, &new_keys)
        .iter()
        .map(|op| op.as_tag_tuple())
        .filter(|(tag, _, _)| *tag != DiffTag::Equal)
        .map(|(_, o, n)| Stretch { old: o.collect(), new: n.collect() })
        .collect();

    // Identical rules that left the common subsequence were moved.
    let mut moves = Vec::new();
    let unmatched_new: Vec<usize> = stretches.iter().flat_map(|s| s.new.clone()).collect();
    for j in unmatched_new {
        let found = stretches.iter_mut().find_map(|s| {
            let pos = s.old.iter().position(|&i| old_keys[i] == new_keys[j])?;
            Some(s.old.remove(pos))
        });
        if let Some(i) = found {
            stretches.iter_mut().for_each(|s| s.new.retain(|&n| n != j));
            moves.push((i, j));
        }
    }
    moves.sort_by_key(|&(_, j)| j);
    for (i, j) in moves {
        let summary = format!("rule ({}) moved from position {} to {}", describe(&new_rules[j]), i + 1, j + 1);
        out.push(RawChange {
            summary: Some(summary),
            ..RawChange::new(ChangeKind::Reordered, rule_path(j), Some(&i.into()), Some(&j.into()))
        });
    }

    for s in stretches {
        let paired = s.old.len().min(s.new.len());
        for (&i, &j) in s.old.iter().zip(&s.new) {
            tree::node(&rule_path(j), &a[i], &b[j], out);
        }
        for &i in &s.old[paired..] {
            let summary = format!("rule {} ({}) removed", i + 1, describe(&old_rules[i]));
            out.push(RawChange {
                summary: Some(summary),
                ..RawChange::new(ChangeKind::Removed, rule_path(i), Some(&a[i]), None)
            });
        }
        for &j in &s.new[paired..] {
            let summary = format!("rule {} ({}) added", j + 1, describe(&new_rules[j]));
            out.push(RawChange {
                summary: Some(summary),
                ..RawChange::new(ChangeKind::Added, rule_path(j), None, Some(&b[j]))
            });
        }
    }
}

fn rule_path(i: usize) -> Vec<Seg> {
    vec![Seg::Key("scheduling_rules".into()), Seg::Index(i)]
}

fn list(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

/// A rule in a few words: `team = research → research`, `team in [ml, cv] → research`,
/// `any job → batch` (a catch-all).
pub(super) fn describe(rule: &SchedulingRule) -> String {
    let exprs = rule.selector.as_deref().unwrap_or_default();
    if exprs.is_empty() {
        return format!("any job → {}", rule.resource_queue);
    }
    let parts: Vec<String> = exprs
        .iter()
        .map(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            match (e.operator, values) {
                (Operator::In, [one]) => format!("{} = {one}", e.key),
                (Operator::NotIn, [one]) => format!("{} ≠ {one}", e.key),
                (op, _) if op.takes_values() => format!("{} {} [{}]", e.key, op.as_str().replace('_', " "), values.join(", ")),
                (op, _) => format!("{} {}", e.key, op.as_str().replace('_', " ")),
            }
        })
        .collect();
    format!("{} → {}", parts.join(", "), rule.resource_queue)
}
