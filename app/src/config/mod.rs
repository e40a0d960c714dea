//! The scheduler config: model, parsing, canonical YAML, validation and diff.
//!
//! Everything here is pure and compiles for the server and for the browser (wasm32), so the
//! dashboard validates a draft with exactly the code the server runs on apply.

#[cfg(test)]
mod fixtures;
pub mod diff;
pub mod model;
pub mod parse;
pub mod place;
pub mod problem;
pub mod route;
pub mod selector;
pub mod validate;
pub mod yaml;

pub use diff::{diff, diff_labeled, line_diff, Change, ChangeKind, ConfigDiff, DiffLine, LineTag, Section};
pub use model::*;
pub use parse::{from_json_value, parse, parse_auto, Format};
pub use problem::{Problem, Report, Severity};
pub use route::{Rejection, Route, Routing};
pub use selector::Labels;
pub use validate::{validate, validate_text, validate_with_nodes, NodeInfo};
pub use yaml::to_canonical_yaml;
