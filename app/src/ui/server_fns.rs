//! Server functions: the dashboard's calls into the server's service layer.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::api::{ConfigVersion, VersionPage};
use crate::config::diff::ConfigDiff;
use crate::config::Problem;
use crate::preview::PreviewReport;

/// Who applies, why, and on top of which version (a mismatch is a conflict, never an
/// overwrite).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApplyInput {
    /// Recorded as the version's `creator_id`.
    pub author: String,
    pub message: Option<String>,
    pub expected_active_version: Option<i64>,
}

/// What became of an apply or a rollback: the expected refusals are outcomes, not errors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ApplyOutcome {
    /// Stored as `version`; `changed` is false when it equals the previous active version.
    Applied { version: i64, changed: bool, warnings: Vec<Problem> },
    /// Someone applied meanwhile: the draft was based on `expected`, `active` is current.
    Conflict { expected: i64, active: i64 },
    /// The server's validator refused it (the browser runs the same one, so this is rare).
    Invalid { problems: Vec<Problem> },
}

#[cfg(feature = "ssr")]
fn backend() -> Result<super::backend::SharedBackend, ServerFnError> {
    use_context::<super::backend::SharedBackend>().ok_or_else(|| ServerFnError::new("the server provided no backend"))
}

/// Version `version`, or the active config.
#[server]
pub async fn get_config(version: Option<i64>) -> Result<ConfigVersion, ServerFnError> {
    backend()?.config(version).await.map_err(ServerFnError::new)
}

/// A page of version summaries, newest first.
#[server]
pub async fn list_versions(cursor: Option<String>, max_items: i64) -> Result<VersionPage, ServerFnError> {
    backend()?.versions(cursor, max_items).await.map_err(ServerFnError::new)
}

/// Diff between two versions; `from` defaults to the predecessor of `to`.
#[server]
pub async fn get_diff(from: Option<i64>, to: Option<i64>) -> Result<ConfigDiff, ServerFnError> {
    backend()?.diff(from, to).await.map_err(ServerFnError::new)
}

/// Applies the draft, given as canonical YAML.
#[server]
pub async fn apply_draft(yaml: String, input: ApplyInput) -> Result<ApplyOutcome, ServerFnError> {
    backend()?.apply(yaml, input).await.map_err(ServerFnError::new)
}

/// Restores `version` as a new version whose message names it.
#[server]
pub async fn rollback_to(version: i64, input: ApplyInput) -> Result<ApplyOutcome, ServerFnError> {
    backend()?.rollback(version, input).await.map_err(ServerFnError::new)
}

/// What the draft (YAML) would have done to the recorded `window`, next to the active config.
/// The browser aborts the request when the caller drops the future, and the server then stops
/// the replay.
#[server]
pub async fn preview_draft(yaml: String, window: String) -> Result<PreviewReport, ServerFnError> {
    backend()?.preview(yaml, window).await.map_err(ServerFnError::new)
}
