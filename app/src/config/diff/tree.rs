//! The generic structural diff of two JSON trees, in the path scheme of the `diff` module:
//! maps by key, lists of uniquely named objects by name, other lists of objects by position,
//! everything else compared whole.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::{child, ChangeKind, RawChange, Seg};

/// A top-level section (`resource_flavors`, …): an absent section is an empty list, unless the
/// other side is an empty list too (then the section itself was added or removed).
pub(super) fn section(key: &str, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<RawChange>) {
    let path = vec![Seg::Key(key.into())];
    match (old, new) {
        (None, None) => {}
        (None, Some(v)) if is_empty_list(v) => out.push(RawChange::new(ChangeKind::Added, path, None, new)),
        (Some(v), None) if is_empty_list(v) => out.push(RawChange::new(ChangeKind::Removed, path, old, None)),
        _ => {
            let empty = Value::Array(Vec::new());
            node(&path, old.unwrap_or(&empty), new.unwrap_or(&empty), out);
        }
    }
}

/// A top-level setting that is one object (`recycle_policy`): added, removed, or diffed
/// field by field.
pub(super) fn setting(key: &str, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<RawChange>) {
    let path = vec![Seg::Key(key.into())];
    match (old, new) {
        (None, None) => {}
        (None, Some(_)) => out.push(RawChange::new(ChangeKind::Added, path, None, new)),
        (Some(_), None) => out.push(RawChange::new(ChangeKind::Removed, path, old, None)),
        (Some(a), Some(b)) => node(&path, a, b, out),
    }
}

fn is_empty_list(v: &Value) -> bool {
    v.as_array().is_some_and(Vec::is_empty)
}

/// Diffs `old` against `new` at `path`.
pub(super) fn node(path: &[Seg], old: &Value, new: &Value, out: &mut Vec<RawChange>) {
    if old == new {
        return;
    }
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => object(path, a, b, out),
        (Value::Array(a), Value::Array(b)) if names(a).is_some() && names(b).is_some() => named_list(path, a, b, out),
        (Value::Array(a), Value::Array(b)) if !all_scalars(a) || !all_scalars(b) => positional(path, a, b, out),
        _ => out.push(RawChange::new(ChangeKind::Changed, path.to_vec(), Some(old), Some(new))),
    }
}

fn object(path: &[Seg], a: &Map<String, Value>, b: &Map<String, Value>, out: &mut Vec<RawChange>) {
    // Old keys in their order, then keys only the new side has.
    let keys = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k)));
    for key in keys {
        let child = child(path, Seg::Key(key.clone()));
        match (a.get(key), b.get(key)) {
            (Some(x), Some(y)) => node(&child, x, y, out),
            (Some(x), None) => out.push(RawChange::new(ChangeKind::Removed, child, Some(x), None)),
            (None, Some(y)) => out.push(RawChange::new(ChangeKind::Added, child, None, Some(y))),
            (None, None) => {}
        }
    }
}

/// The names of a list whose items are all objects with a distinct string `name`.
pub(super) fn names(list: &[Value]) -> Option<Vec<&str>> {
    let names: Vec<&str> = list.iter().map(|v| v.get("name")?.as_str()).collect::<Option<_>>()?;
    let distinct: HashSet<&str> = names.iter().copied().collect();
    (distinct.len() == names.len()).then_some(names)
}

fn named_list(path: &[Seg], a: &[Value], b: &[Value], out: &mut Vec<RawChange>) {
    let (old_names, new_names) = (names(a).unwrap_or_default(), names(b).unwrap_or_default());
    let common_old: Vec<&str> = old_names.iter().copied().filter(|n| new_names.contains(n)).collect();
    let common_new: Vec<&str> = new_names.iter().copied().filter(|n| old_names.contains(n)).collect();
    if common_old != common_new {
        let (old_order, new_order) = (Value::from(common_old), Value::from(common_new));
        out.push(RawChange::new(ChangeKind::Reordered, path.to_vec(), Some(&old_order), Some(&new_order)));
    }
    for (item, name) in a.iter().zip(&old_names) {
        if !new_names.contains(name) {
            out.push(RawChange::new(ChangeKind::Removed, child(path, Seg::Name(name.to_string())), Some(item), None));
        }
    }
    for (item, name) in b.iter().zip(&new_names) {
        let child = child(path, Seg::Name(name.to_string()));
        match old_names.iter().position(|n| n == name) {
            Some(i) => node(&child, &a[i], item, out),
            None => out.push(RawChange::new(ChangeKind::Added, child, None, Some(item))),
        }
    }
}

fn positional(path: &[Seg], a: &[Value], b: &[Value], out: &mut Vec<RawChange>) {
    for i in 0..a.len().max(b.len()) {
        let child = child(path, Seg::Index(i));
        match (a.get(i), b.get(i)) {
            (Some(x), Some(y)) => node(&child, x, y, out),
            (Some(x), None) => out.push(RawChange::new(ChangeKind::Removed, child, Some(x), None)),
            (None, Some(y)) => out.push(RawChange::new(ChangeKind::Added, child, None, Some(y))),
            (None, None) => {}
        }
    }
}

fn all_scalars(list: &[Value]) -> bool {
    list.iter().all(|v| !v.is_array() && !v.is_object())
}
