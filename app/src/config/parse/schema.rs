//! Which keys each part of the config accepts, for the "unknown field" message.
//!
//! The accepted names are read from the model's own `Deserialize` impls (serde passes the
//! field list to `deserialize_struct`), so the message can never drift from the types.

use std::fmt;

use serde::de::{self, Deserialize, Visitor};

use crate::config::model::*;
use crate::config::problem::Problem;

/// One step of a path: a map key or a list index.
enum Step {
    Key(String),
    Index(usize),
}

/// The problem for one key that `serde_ignored` reported as skipped.
pub(super) fn unknown_key(path: &serde_ignored::Path) -> Problem {
    let mut steps = Vec::new();
    collect(path, &mut steps);
    let Some(Step::Key(key)) = steps.pop() else {
        return Problem::error(format_path(&steps), "unexpected value");
    };
    let mut full = format_path(&steps);
    super::push_key(&mut full, &key);
    let expected = expected_fields(&steps);
    let mut message = format!("unknown field `{key}`");
    if let Some(near) = closest(&key, expected) {
        message.push_str(&format!(" (did you mean `{near}`?)"));
    }
    if !expected.is_empty() {
        message.push_str(&format!("; expected one of {}", expected.join(", ")));
    }
    Problem::error(full, message)
}

fn collect(path: &serde_ignored::Path, out: &mut Vec<Step>) {
    use serde_ignored::Path as P;
    match path {
        P::Root => {}
        P::Seq { parent, index } => {
            collect(parent, out);
            out.push(Step::Index(*index));
        }
        P::Map { parent, key } => {
            collect(parent, out);
            out.push(Step::Key(key.clone()));
        }
        P::Some { parent } | P::NewtypeStruct { parent } | P::NewtypeVariant { parent } => collect(parent, out),
    }
}

fn format_path(steps: &[Step]) -> String {
    let mut out = String::new();
    for step in steps {
        match step {
            Step::Key(k) => super::push_key(&mut out, k),
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// The fields of the struct found at `parent` (indices ignored), or none if unknown.
fn expected_fields(parent: &[Step]) -> &'static [&'static str] {
    let keys: Vec<&str> = parent
        .iter()
        .filter_map(|s| match s {
            Step::Key(k) => Some(k.as_str()),
            Step::Index(_) => None,
        })
        .collect();
    match keys.as_slice() {
        [] => fields_of::<SchedulerConfig>(),
        ["resource_flavors"] => fields_of::<ResourceFlavor>(),
        ["resource_flavors" | "scheduling_rules", "selector"] => fields_of::<MatchExpression>(),
        ["resource_queues"] => fields_of::<ResourceQueue>(),
        ["resource_queues", "preemption"] => fields_of::<PreemptionPolicy>(),
        ["resource_queues", "resource_groups"] => fields_of::<ResourceGroup>(),
        ["resource_queues", "resource_groups", "flavors"] => fields_of::<FlavorQuota>(),
        ["resource_queues", "resource_groups", "flavors", "resources"] => fields_of::<ResourceQuotaSpec>(),
        ["scheduling_rules"] => fields_of::<SchedulingRule>(),
        ["scheduling_rules", "priority_policy"] => fields_of::<PriorityPolicy>(),
        ["recycle_policy"] => fields_of::<RecyclePolicy>(),
        _ => &[],
    }
}

/// The accepted name nearest to a typo, if it is close (edit distance ≤ 2).
fn closest(key: &str, expected: &[&'static str]) -> Option<&'static str> {
    expected
        .iter()
        .map(|e| (edit_distance(key, e), *e))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, e)| e)
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The field names `T`'s derived `Deserialize` accepts.
pub(super) fn fields_of<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
    match T::deserialize(FieldsProbe) {
        Err(Fields(fields)) => fields,
        Ok(_) => &[],
    }
}

/// A deserializer that only answers "which fields?": it fails in `deserialize_struct`,
/// carrying the list serde handed it.
struct FieldsProbe;

/// The probe's error: the captured field list.
#[derive(Debug)]
struct Fields(&'static [&'static str]);

impl fmt::Display for Fields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fields probe")
    }
}

impl std::error::Error for Fields {}

impl de::Error for Fields {
    fn custom<M: fmt::Display>(_: M) -> Self {
        Fields(&[])
    }
}

impl<'de> de::Deserializer<'de> for FieldsProbe {
    type Error = Fields;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Fields> {
        Err(Fields(&[]))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Fields> {
        Err(Fields(fields))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}
