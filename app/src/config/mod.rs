//! The scheduler config: model, parsing, canonical YAML, validation and diff.
//!
//! Everything here is pure and compiles for the server and for the browser (wasm32), so the
//! dashboard validates a draft with exactly the code the server runs on apply.

pub mod diff;
pub mod model;
pub mod parse;
pub mod problem;
pub mod selector;
pub mod validate;
pub mod yaml;

pub use model::*;
pub use problem::{Problem, Report, Severity};
pub use selector::Labels;
