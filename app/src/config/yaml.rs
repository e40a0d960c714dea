//! The canonical YAML form of a config: one deterministic text per config, the exact inverse
//! of [`parse`](super::parse::parse).
//!
//! Versions are stored, shown and diffed in this form, so it is written by a small emitter
//! of our own rather than by a general serializer whose style could change under us. The
//! style is the seed's: keys in struct order, 2-space indentation, list items indented under
//! their key, lists of scalars in flow style (`values: [spot]`), `[]` and `{}` for empty
//! collections, strings plain when that is unambiguous and double-quoted otherwise.

mod scalar;
#[cfg(test)]
mod tests;

use serde_norway::{Mapping, Value};

use super::model::SchedulerConfig;

/// Above this many characters a map key is written in explicit form (`? key`), because YAML
/// limits implicit keys to 1024 characters.
const MAX_IMPLICIT_KEY: usize = 1000;

/// The canonical YAML text of `cfg`, ending with a newline; the empty config is `{}`.
pub fn to_canonical_yaml(cfg: &SchedulerConfig) -> String {
    // The model holds only strings, numbers, lists and string-keyed maps: this cannot fail.
    let value = serde_norway::to_value(cfg).expect("config serializes to a YAML value");
    let mut out = String::new();
    match &value {
        Value::Mapping(map) if !map.is_empty() => block_map(map, 0, false, Ctx::Typed, &mut out),
        other => {
            out.push_str(&flow(other, Ctx::Typed));
            out.push('\n');
        }
    }
    out
}

/// Where a value sits: in the typed model, or inside the free-form `advanced_instance_config`
/// (where `1.0` and `1` are different JSON numbers and must stay so).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Typed,
    FreeForm,
}

/// Whether `v` is written on one line: scalars, empty collections, lists of scalars.
fn is_flow(v: &Value) -> bool {
    match v {
        Value::Sequence(seq) => seq.iter().all(is_scalar),
        Value::Mapping(map) => map.is_empty(),
        _ => true,
    }
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Sequence(_) | Value::Mapping(_))
}

/// The one-line form of a value for which [`is_flow`] holds.
fn flow(v: &Value, ctx: Ctx) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => scalar::number(n, ctx == Ctx::FreeForm),
        Value::String(s) => scalar::string(s),
        Value::Sequence(seq) => {
            let items: Vec<String> = seq.iter().map(|i| flow(i, ctx)).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Mapping(_) => "{}".into(),
        // The model serializes no YAML tags (its enums are plain strings).
        Value::Tagged(t) => flow(&t.value, ctx),
    }
}

/// Writes a non-empty map at `indent`; with `inline`, the first entry continues the current
/// line (after a list item's `- `).
fn block_map(map: &Mapping, indent: usize, inline: bool, ctx: Ctx, out: &mut String) {
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 || !inline {
            pad(out, indent);
        }
        let key_text = flow(key, ctx);
        let child_ctx = match key.as_str() {
            Some("advanced_instance_config") => Ctx::FreeForm,
            _ => ctx,
        };
        if key_text.chars().count() > MAX_IMPLICIT_KEY {
            out.push_str("? ");
            out.push_str(&key_text);
            out.push('\n');
            pad(out, indent);
        } else {
            out.push_str(&key_text);
        }
        out.push(':');
        match value {
            v if is_flow(v) => {
                out.push(' ');
                out.push_str(&flow(v, child_ctx));
                out.push('\n');
            }
            Value::Mapping(m) => {
                out.push('\n');
                block_map(m, indent + 2, false, child_ctx, out);
            }
            Value::Sequence(s) => {
                out.push('\n');
                block_seq(s, indent + 2, false, child_ctx, out);
            }
            _ => unreachable!("scalars and tags are flow"),
        }
    }
}

/// Writes a non-empty list at `indent`, one `- ` item per line group.
fn block_seq(seq: &[Value], indent: usize, inline: bool, ctx: Ctx, out: &mut String) {
    for (i, item) in seq.iter().enumerate() {
        if i > 0 || !inline {
            pad(out, indent);
        }
        out.push_str("- ");
        match item {
            v if is_flow(v) => {
                out.push_str(&flow(v, ctx));
                out.push('\n');
            }
            Value::Mapping(m) => block_map(m, indent + 2, true, ctx, out),
            Value::Sequence(s) => block_seq(s, indent + 2, true, ctx, out),
            _ => unreachable!("scalars and tags are flow"),
        }
    }
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}
