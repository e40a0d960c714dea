//! One human sentence per change, e.g. "queue research: gpu quota on flavor spot 64 → 32".

use serde_json::Value;

use super::{rules, ChangeKind, RawChange, Seg};
use crate::config::model::SchedulerConfig;
use crate::config::place;

/// The summary of `c`, worded for its place in the config.
pub(super) fn sentence(c: &RawChange, old_cfg: &SchedulerConfig, new_cfg: &SchedulerConfig) -> String {
    let (old, new) = (c.old.as_ref(), c.new.as_ref());
    let Some(Seg::Key(section)) = c.path.first() else { return generic("config", c.kind, &c.path, old, new) };
    let (noun, plural) = match section.as_str() {
        "resource_flavors" => ("flavor", "flavors"),
        "resource_queues" => ("queue", "queues"),
        "scheduling_rules" => ("rule", "rules"),
        _ => ("recycle policy", "recycle policy"),
    };
    let Some(item) = c.path.get(1) else {
        return match c.kind {
            ChangeKind::Reordered => format!("{noun} order: {} → {}", names(old), names(new)),
            ChangeKind::Added => format!("{section} added ({})", show_or_empty(new)),
            ChangeKind::Removed => format!("{section} removed (was {})", show_or_empty(old)),
            ChangeKind::Changed => format!("{plural}: {} → {}", show(old), show(new)),
        };
    };
    let subject = match item {
        Seg::Name(n) => format!("{noun} {n}"),
        Seg::Index(i) if noun == "rule" => {
            let rule = new_cfg.rules().get(*i).or_else(|| old_cfg.rules().get(*i));
            match rule {
                Some(r) => format!("rule {} ({})", i + 1, rules::describe(r)),
                None => format!("rule {}", i + 1),
            }
        }
        Seg::Index(i) => format!("{noun} {}", i + 1),
        Seg::Key(k) => format!("{noun} {k}"),
    };
    let rest = &c.path[2..];
    if rest.is_empty() {
        return match c.kind {
            ChangeKind::Added => format!("{subject} added"),
            ChangeKind::Removed => format!("{subject} removed"),
            _ => generic(&subject, c.kind, rest, old, new),
        };
    }
    quota(&subject, c.kind, rest, old, new)
        .or_else(|| group_flavor(&subject, c.kind, rest, old, new))
        .unwrap_or_else(|| generic(&subject, c.kind, rest, old, new))
}

/// `resource_groups[g].flavors[F].resources[R].<limit>`: "gpu quota on flavor spot 64 → 32".
fn quota(subject: &str, kind: ChangeKind, rest: &[Seg], old: Option<&Value>, new: Option<&Value>) -> Option<String> {
    let [Seg::Key(groups), Seg::Index(_), Seg::Key(flavors), Seg::Name(flavor), Seg::Key(resources), Seg::Name(resource), tail @ ..] =
        rest
    else {
        return None;
    };
    if (groups.as_str(), flavors.as_str(), resources.as_str()) != ("resource_groups", "flavors", "resources") {
        return None;
    }
    let what = match tail {
        [] => return Some(format!("{subject}: {resource} quota on flavor {flavor} {}", added_removed(kind))),
        [Seg::Key(f)] if f == "nominal_quota" => "quota",
        [Seg::Key(f)] if f == "borrowing_limit" => "borrowing limit",
        [Seg::Key(f)] if f == "lending_limit" => "lending limit",
        _ => return None,
    };
    // An absent limit is no limit.
    let value = |v: Option<&Value>| v.map_or_else(|| "unlimited".to_string(), |v| show(Some(v)));
    Some(format!("{subject}: {resource} {what} on flavor {flavor} {} → {}", value(old), value(new)))
}

/// `resource_groups[g].flavors[F]` and the order of a group's flavors.
fn group_flavor(
    subject: &str,
    kind: ChangeKind,
    rest: &[Seg],
    old: Option<&Value>,
    new: Option<&Value>,
) -> Option<String> {
    match rest {
        [Seg::Key(groups), Seg::Index(g), Seg::Key(flavors)] if groups == "resource_groups" && flavors == "flavors" => {
            (kind == ChangeKind::Reordered).then(|| {
                format!("{subject}: flavor preference in resource group {} {} → {}", g + 1, names(old), names(new))
            })
        }
        [Seg::Key(groups), Seg::Index(g), Seg::Key(flavors), Seg::Name(flavor)]
            if groups == "resource_groups" && flavors == "flavors" =>
        {
            let to = match kind {
                ChangeKind::Added => "to",
                _ => "from",
            };
            Some(format!("{subject}: flavor {flavor} {} {to} resource group {}", added_removed(kind), g + 1))
        }
        _ => None,
    }
}

fn generic(subject: &str, kind: ChangeKind, rest: &[Seg], old: Option<&Value>, new: Option<&Value>) -> String {
    let at = plain(rest);
    match kind {
        ChangeKind::Changed => format!("{subject}: {at} {} → {}", show(old), show(new)),
        ChangeKind::Added if new.is_some_and(is_simple) => format!("{subject}: {at} added ({})", show(new)),
        ChangeKind::Removed if old.is_some_and(is_simple) => format!("{subject}: {at} removed (was {})", show(old)),
        ChangeKind::Added | ChangeKind::Removed => format!("{subject}: {at} {}", added_removed(kind)),
        ChangeKind::Reordered => format!("{subject}: order of {at} {} → {}", names(old), names(new)),
    }
}

/// The rest of a path in words: `selector[0].values` → `condition 1 values`,
/// `resource_groups[1].covered_resources` → `resource group 2 covered resources`.
fn plain(rest: &[Seg]) -> String {
    let mut words: Vec<String> = Vec::new();
    for (i, seg) in rest.iter().enumerate() {
        // An item of a list reads as one word with the list: `condition 1`, not `selector 1`.
        let list = match i.checked_sub(1).map(|p| &rest[p]) {
            Some(Seg::Key(k)) => Some(place::item_noun(k)),
            _ => None,
        };
        let word = match (seg, list) {
            (Seg::Key(k), _) => place::field(k).to_string(),
            (Seg::Index(n), Some(noun)) => format!("{noun} {}", n + 1),
            (Seg::Name(n), Some(noun)) => format!("{noun} {n}"),
            (Seg::Index(n), None) => format!("item {}", n + 1),
            (Seg::Name(n), None) => n.clone(),
        };
        if list.is_some() {
            words.pop();
        }
        words.push(word);
    }
    words.join(" ")
}

fn added_removed(kind: ChangeKind) -> &'static str {
    match kind {
        ChangeKind::Added => "added",
        ChangeKind::Removed => "removed",
        ChangeKind::Changed => "changed",
        ChangeKind::Reordered => "reordered",
    }
}

/// Scalars and lists of scalars, which read well inline.
fn is_simple(v: &Value) -> bool {
    match v {
        Value::Array(items) => items.iter().all(|i| !i.is_array() && !i.is_object()),
        Value::Object(map) => map.is_empty(),
        _ => true,
    }
}

/// A list of names as `a, b`.
fn names(v: Option<&Value>) -> String {
    match v {
        Some(Value::Array(items)) => items.iter().map(|i| show(Some(i))).collect::<Vec<_>>().join(", "),
        other => show(other),
    }
}

fn show_or_empty(v: Option<&Value>) -> String {
    match v {
        Some(Value::Array(items)) if items.is_empty() => "empty".into(),
        other => show(other),
    }
}

/// A value as a person reads it: `64`, `spot`, `[cpu, gpu]`, compact JSON for the rest.
fn show(v: Option<&Value>) -> String {
    match v {
        None => "(none)".into(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if n.is_f64() => crate::config::validate::number(x),
            _ => n.to_string(),
        },
        Some(Value::Array(items)) if items.iter().all(|i| !i.is_array() && !i.is_object()) => {
            format!("[{}]", items.iter().map(|i| show(Some(i))).collect::<Vec<_>>().join(", "))
        }
        Some(other) => other.to_string(),
    }
}
