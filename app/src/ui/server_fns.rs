//! Server functions: the dashboard's calls into the server's service layer.

use leptos::prelude::*;

use crate::api::{ConfigVersion, VersionPage};
use crate::config::diff::ConfigDiff;

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
