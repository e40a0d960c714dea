//! Text (YAML or JSON) to [`SchedulerConfig`], with every unknown key and the first type or
//! syntax error reported as a [`Problem`] with its path.
//!
//! The model types do not use `deny_unknown_fields` (that would stop at the first typo).
//! Instead the deserializer is wrapped twice: `serde_ignored` collects every key the types
//! skipped, and `serde_path_to_error` gives the path of a type error. Keys inside the
//! free-form `advanced_instance_config` map are never "ignored", so nothing is reported there.
//! A type error stops deserialization, so unknown keys *after* it in the text are not seen
//! until it is fixed.

mod schema;
#[cfg(test)]
mod tests;

use serde::Deserializer;

use super::model::SchedulerConfig;
use super::problem::Problem;

/// The text format of a config document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Yaml,
    Json,
}

/// Parses `text` in `format`; a blank (or YAML `null`) document is the empty config.
pub fn parse(text: &str, format: Format) -> Result<SchedulerConfig, Vec<Problem>> {
    // Checked first because YAML rejects some whitespace (tabs) that a person sees as nothing.
    if text.trim().is_empty() {
        return Ok(SchedulerConfig::default());
    }
    match format {
        Format::Yaml => parse_yaml(text),
        Format::Json => parse_json(text),
    }
}

/// Parses JSON when the first non-space character is `{`, YAML otherwise.
pub fn parse_auto(text: &str) -> Result<SchedulerConfig, Vec<Problem>> {
    parse(text, detect_format(text))
}

/// The format [`parse_auto`] picks for `text`.
pub fn detect_format(text: &str) -> Format {
    match text.trim_start().starts_with('{') {
        true => Format::Json,
        false => Format::Yaml,
    }
}

/// Reads a config out of an already-parsed JSON value (e.g. the `config` field of a request).
pub fn from_json_value(value: &serde_json::Value) -> Result<SchedulerConfig, Vec<Problem>> {
    let (result, mut problems) = deserialize_tracked(value);
    match result {
        Ok(cfg) if problems.is_empty() => Ok(cfg),
        Ok(_) => Err(problems),
        Err((path, err)) => {
            problems.push(Problem::error(path, plain_message(&err.to_string(), "")));
            Err(problems)
        }
    }
}

fn parse_yaml(text: &str) -> Result<SchedulerConfig, Vec<Problem>> {
    let (result, mut problems) = deserialize_tracked(serde_norway::Deserializer::from_str(text));
    let (path, err) = match result {
        Ok(cfg) if problems.is_empty() => return Ok(cfg),
        Ok(_) => return Err(problems),
        Err(e) => e,
    };
    // A document that is not even well-formed YAML gets one syntax problem, no path. The
    // typed pass may have stopped at a type error before reaching the syntax error, so the
    // syntax is checked on its own.
    let problem = match serde_norway::from_str::<serde_norway::Value>(text) {
        Err(syntax) => {
            problems.clear();
            let message = format!("invalid YAML: {}", plain_message(&syntax.to_string(), ""));
            at(Problem::error("", message), syntax.location())
        }
        Ok(_) => at(Problem::error(&path, plain_message(&err.to_string(), &path)), err.location()),
    };
    problems.push(problem);
    Err(problems)
}

/// `problem` with the (1-based) position of a YAML error, when it has one.
fn at(problem: Problem, location: Option<serde_norway::Location>) -> Problem {
    match location {
        Some(loc) if loc.line() > 0 => Problem { line: Some(loc.line()), column: Some(loc.column()), ..problem },
        _ => problem,
    }
}

fn parse_json(text: &str) -> Result<SchedulerConfig, Vec<Problem>> {
    let mut de = serde_json::Deserializer::from_str(text);
    let (result, mut problems) = deserialize_tracked(&mut de);
    let result = result.and_then(|cfg| de.end().map(|()| cfg).map_err(|e| (String::new(), e)));
    let (path, err) = match result {
        Ok(cfg) if problems.is_empty() => return Ok(cfg),
        Ok(_) => return Err(problems),
        Err(e) => e,
    };
    let (line, column) = match err.line() {
        0 => (None, None),
        // serde_json says column 0 at the very end of a line; 1 is the first column.
        line => (Some(line), Some(err.column().max(1))),
    };
    let problem = if err.is_syntax() || err.is_eof() {
        problems.clear();
        let message = format!("invalid JSON: {}", plain_message(&err.to_string(), ""));
        Problem { line, column, ..Problem::error("", message) }
    } else {
        Problem { line, column, ..Problem::error(&path, plain_message(&err.to_string(), &path)) }
    };
    problems.push(problem);
    Err(problems)
}

/// The config or the failing path and error, plus the unknown-key problems.
type Tracked<E> = (Result<SchedulerConfig, (String, E)>, Vec<Problem>);

/// Deserializes through both wrappers: the config (or the failing path and error) plus one
/// problem per unknown key, in document order.
fn deserialize_tracked<'de, D: Deserializer<'de>>(de: D) -> Tracked<D::Error> {
    let mut problems = Vec::new();
    let mut track = serde_path_to_error::Track::new();
    let tracked = serde_path_to_error::Deserializer::new(de, &mut track);
    // `Option` so that an empty or `null` document is the empty config.
    let result: Result<Option<SchedulerConfig>, D::Error> =
        serde_ignored::deserialize(tracked, |ignored| problems.push(schema::unknown_key(&ignored)));
    let result = result.map(Option::unwrap_or_default).map_err(|e| (error_path(&track.path()), e));
    (result, problems)
}

/// Formats a `serde_path_to_error` path as `a[0].b.c`.
fn error_path(path: &serde_path_to_error::Path) -> String {
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            serde_path_to_error::Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            serde_path_to_error::Segment::Map { key } | serde_path_to_error::Segment::Enum { variant: key } => {
                push_key(&mut out, key)
            }
            serde_path_to_error::Segment::Unknown => push_key(&mut out, "?"),
        }
    }
    out
}

/// Appends `.key` (or `key` at the root) to a path.
pub(crate) fn push_key(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

/// A deserializer's message without its position suffix and path prefix (we report both as
/// separate fields), in plainer words for the common type names.
fn plain_message(raw: &str, path: &str) -> String {
    let mut msg = strip_positions(raw);
    let prefix = format!("{path}: ");
    if !path.is_empty() && msg.starts_with(&prefix) {
        msg.drain(..prefix.len());
    }
    for (from, to) in [
        ("expected f64", "expected a number"),
        ("expected i64", "expected a whole number"),
        ("expected a borrowed string", "expected a string"),
        ("expected a map", "expected a mapping"),
    ] {
        msg = msg.replace(from, to);
    }
    if let Some(i) = msg.find("expected struct ") {
        msg.truncate(i);
        msg.push_str("expected a mapping");
    }
    msg
}

/// Removes every ` at line N column M` and ` at position N` from a message.
fn strip_positions(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(i) = rest.find(" at ") {
        let (head, tail) = rest.split_at(i);
        out.push_str(head);
        let after = &tail[4..];
        match position_len(after) {
            Some(n) => rest = &after[n..],
            None => {
                out.push_str(" at ");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Length of a leading `line N column M` or `position N`, if `s` starts with one.
fn position_len(s: &str) -> Option<usize> {
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    if let Some(r) = s.strip_prefix("line ") {
        let n = digits(r);
        let r2 = r[n..].strip_prefix(" column ")?;
        let m = digits(r2);
        (n > 0 && m > 0).then_some("line ".len() + n + " column ".len() + m)
    } else if let Some(r) = s.strip_prefix("position ") {
        let n = digits(r);
        (n > 0).then_some("position ".len() + n)
    } else {
        None
    }
}
