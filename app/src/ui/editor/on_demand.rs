//! The editor's parts that a visit may never use, in one wasm chunk of their own, fetched the
//! first time one is needed (or ahead, once the user starts editing or opens the YAML tab):
//! - the YAML reader, for the YAML tab, an upload and a restored draft;
//! - the review before apply: the draft's changes and the what-if preview;
//! - the changes shown when someone else applied meanwhile.
//!
//! They make up about a fifth of the editor's code. One chunk for all of them, rather than a
//! lazy function each, keeps down the number of files every page loads: wasm-split cuts a
//! chunk for each set of split points that share code.

use leptos::prelude::*;

use crate::config::{parse_auto, ConfigDiff, Problem, SchedulerConfig};

/// The parts, as plain functions once their chunk is there.
#[derive(Clone, Copy)]
pub struct Parts {
    /// YAML (or JSON) text to a config, as the server reads it.
    pub read_text: fn(&str) -> Result<SchedulerConfig, Vec<Problem>>,
    /// The review's body: what the draft changes against the active version, then the
    /// what-if preview (needs the [`Editor`](super::Editor) context).
    pub review: fn() -> AnyView,
    /// A diff of two configs: the diff, both canonical YAMLs and their labels.
    pub changes: fn(ConfigDiff, String, String, String, String) -> AnyView,
}

/// Named for the build's size report (`+ editor_on_demand`).
#[leptos::lazy]
fn editor_on_demand() -> Parts {
    Parts { read_text: parse_auto, review: super::apply::review_body, changes: super::apply::changes_view }
}

/// The parts, fetching their chunk the first time.
pub async fn parts() -> Parts {
    editor_on_demand().await
}

/// Starts fetching the parts' chunk, if it is not there yet.
#[cfg(feature = "hydrate")]
pub fn preload() {
    leptos::task::spawn_local(__preload_editor_on_demand());
}
