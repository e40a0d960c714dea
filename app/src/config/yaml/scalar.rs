//! Scalars in canonical YAML: numbers in their shortest form, strings plain only when no YAML
//! reader (1.1 or 1.2) could take them for anything else.

use serde_norway::Number;

/// Words that some YAML reader resolves to a bool, null or special float (compared
/// case-insensitively); a string spelled like one of them is always quoted.
const RESERVED: &[&str] = &["true", "false", "yes", "no", "on", "off", "y", "n", "null", "inf", "nan", "infinity"];

/// A number: integers as digits; floats shortest (`0.5`), integral ones without `.0` in the
/// typed model (`nominal_quota: 64`) but with it in free-form maps, where `1.0` ≠ `1`.
pub(super) fn number(n: &Number, free_form: bool) -> String {
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    // -0 equals 0, so it is written as 0: equal configs must have the same text.
    let x = n.as_f64().map_or(f64::NAN, |x| if x == 0.0 { 0.0 } else { x });
    if x.is_nan() {
        ".nan".into()
    } else if x.is_infinite() {
        if x > 0.0 { ".inf" } else { "-.inf" }.into()
    } else if !free_form && x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x}")
    } else {
        // Debug is the shortest text that reads back to the same f64 (`1e300`, `64.0`).
        format!("{x:?}")
    }
}

/// A string, plain when safe and double-quoted otherwise.
pub(super) fn string(s: &str) -> String {
    if is_plain_safe(s) {
        s.to_string()
    } else {
        quote(s)
    }
}

/// Conservative: starts with a letter, `_` or `/`; only letters, digits, `_-./` and inner
/// single spaces; not a reserved word. This excludes every indicator (`:#,[]{}&*!|>'"%@`),
/// anything that could be a number, and leading or trailing space.
fn is_plain_safe(s: &str) -> bool {
    let Some(first) = s.chars().next() else { return false };
    (first.is_ascii_alphabetic() || first == '_' || first == '/')
        && !s.ends_with(' ')
        && !s.contains("  ")
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | ' '))
        && !RESERVED.iter().any(|r| r.eq_ignore_ascii_case(s))
}

/// A double-quoted YAML string with JSON-style escapes; every character a YAML reader could
/// fold, drop or reject (controls, DEL, C1, line/paragraph separators, BOM) is escaped.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if needs_escape(c) => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn needs_escape(c: char) -> bool {
    let u = c as u32;
    u < 0x20 || (0x7F..=0x9F).contains(&u) || matches!(u, 0x2028 | 0x2029 | 0xFEFF | 0xFFFE | 0xFFFF)
}
