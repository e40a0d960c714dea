//! What the dashboard's server functions need from the server, as a trait the server
//! implements. The app crate stays free of the database; the server provides an
//! `Arc<dyn Backend>` as Leptos context.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::server_fns::{ApplyInput, ApplyOutcome};
use crate::api::{ConfigVersion, VersionPage};
use crate::config::diff::ConfigDiff;
use crate::preview::PreviewReport;

/// A boxed, sendable future (the trait must be object-safe).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The server's services as the dashboard sees them; errors are messages for people.
pub trait Backend: Send + Sync + 'static {
    /// Version `version`, or the active one.
    fn config(&self, version: Option<i64>) -> BoxFuture<'_, Result<ConfigVersion, String>>;
    /// A page of versions, newest first.
    fn versions(&self, cursor: Option<String>, max_items: i64) -> BoxFuture<'_, Result<VersionPage, String>>;
    /// Diff between two versions (defaults as in the service).
    fn diff(&self, from: Option<i64>, to: Option<i64>) -> BoxFuture<'_, Result<ConfigDiff, String>>;
    /// Applies a config given as YAML; a stale base or an invalid config is an outcome.
    fn apply(&self, yaml: String, input: ApplyInput) -> BoxFuture<'_, Result<ApplyOutcome, String>>;
    /// Applies a copy of `version` as a new version.
    fn rollback(&self, version: i64, input: ApplyInput) -> BoxFuture<'_, Result<ApplyOutcome, String>>;
    /// Replays the recorded `window` (`24h`, …) under the draft (YAML) and the active config;
    /// dropping the future stops the replay.
    fn preview(&self, yaml: String, window: String) -> BoxFuture<'_, Result<PreviewReport, String>>;
}

/// The backend as provided in context.
pub type SharedBackend = Arc<dyn Backend>;
