//! What the dashboard's server functions need from the server, as a trait the server
//! implements. The app crate stays free of the database; the server provides an
//! `Arc<dyn Backend>` as Leptos context.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::api::{ApplyInput, ApplyOutcome, SubmitOutcome};
use crate::api::{ConfigVersion, VersionPage};
use crate::auth::{AuditPage, CreatedToken, NewToken, TokenInfo, Whoami};
use crate::config::diff::ConfigDiff;
use crate::config::Problem;
use crate::jobs::{Admissions, CohortView, EventPage, History, Job, JobPage, JobRequest, NodeView, QueueView, StageResults, StageStatus, UsageReport};
use crate::preview::PreviewReport;

/// A boxed, sendable future (the trait must be object-safe).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// An answer or a message for people.
pub type Answer<'a, T> = BoxFuture<'a, Result<T, String>>;

/// The server's services as the dashboard sees them. Queries are URL query strings with
/// the REST API's parameters, so a page's URL and the API share one parser. The caller is
/// the signed-in user of the request being served; the services decide what it may do.
pub trait Backend: Send + Sync + 'static {
    /// Who is signed in (`None`: nobody, and anonymous mode is off).
    fn whoami(&self) -> Option<Whoami>;
    /// Every API token (admins only).
    fn tokens(&self) -> Answer<'_, Vec<TokenInfo>>;
    /// Creates a token; its secret is in the answer only.
    fn create_token(&self, new: NewToken) -> Answer<'_, CreatedToken>;
    /// Revokes a token at once.
    fn revoke_token(&self, id: String) -> Answer<'_, TokenInfo>;
    /// A page of the audit log (`GET /api/v1/audit` parameters; admins only).
    fn audit(&self, query: String) -> Answer<'_, AuditPage>;

    /// Version `version`, or the active one.
    fn config(&self, version: Option<i64>) -> Answer<'_, ConfigVersion>;
    /// A page of versions, newest first.
    fn versions(&self, cursor: Option<String>, max_items: i64) -> Answer<'_, VersionPage>;
    /// Diff between two versions (defaults as in the service).
    fn diff(&self, from: Option<i64>, to: Option<i64>) -> Answer<'_, ConfigDiff>;
    /// Applies a config given as YAML; a stale base or an invalid config is an outcome.
    fn apply(&self, yaml: String, input: ApplyInput) -> Answer<'_, ApplyOutcome>;
    /// The warnings of a draft (YAML) that need the server's nodes: flavors that select no
    /// node, quotas above what the selected nodes have.
    fn capacity_warnings(&self, yaml: String) -> Answer<'_, Vec<Problem>>;
    /// Applies a copy of `version` as a new version.
    fn rollback(&self, version: i64, input: ApplyInput) -> Answer<'_, ApplyOutcome>;
    /// Replays the recorded `window` (`24h`, …) under the draft (YAML) and the active config;
    /// dropping the future stops the replay.
    fn preview(&self, yaml: String, window: String, token: String) -> Answer<'_, PreviewReport>;
    /// `(done, total)` arrivals replayed by the preview running under `token`, if any.
    fn preview_progress(&self, token: String) -> Option<(u64, u64)>;

    /// Every queue of the active config: usage vs quota, counts, pending and running jobs.
    fn queues(&self) -> Answer<'_, Vec<QueueView>>;
    /// One queue with its pending (in admission order) and running jobs.
    fn queue(&self, name: String) -> Answer<'_, QueueView>;
    /// Every cohort: its members' nominal, use, borrowed and lent, and their shares.
    fn cohorts(&self) -> Answer<'_, Vec<CohortView>>;
    /// One cohort.
    fn cohort(&self, name: String) -> Answer<'_, CohortView>;
    /// Which replica runs the admission loop, as a sentence for people.
    fn leader(&self) -> Answer<'_, String>;
    /// The nodes of every backend with capacity, free resources and matching flavors.
    fn nodes(&self) -> Answer<'_, Vec<NodeView>>;
    /// A page of jobs (`GET /api/v1/jobs` parameters).
    fn jobs(&self, query: String) -> Answer<'_, JobPage>;
    /// One job with its state history.
    fn job(&self, id: String) -> Answer<'_, Job>;
    /// The last `tail` lines of a job's stdout or stderr.
    fn logs(&self, id: String, stderr: bool, tail: u64) -> Answer<'_, String>;
    /// Cancels a job.
    fn cancel(&self, id: String) -> Answer<'_, Job>;
    /// Changes a job's requested priority.
    fn set_priority(&self, id: String, priority: i64) -> Answer<'_, Job>;
    /// Submits a job; a rejection or bad input is an outcome.
    fn submit(&self, request: JobRequest) -> Answer<'_, SubmitOutcome>;
    /// A page of events (`GET /api/v1/events` parameters).
    fn events(&self, query: String) -> Answer<'_, EventPage>;
    /// Downsampled resource history (`GET /api/v1/history` parameters).
    fn history(&self, query: String) -> Answer<'_, History>;
    /// A stage's progress and results.
    fn stage(&self, id: String) -> Answer<'_, (StageStatus, StageResults)>;
    /// One queue's admissions and waits in a range (`queue=&since=&until=`).
    fn admissions(&self, query: String) -> Answer<'_, Admissions>;
    /// The accounting report (`GET /api/v1/usage` parameters).
    fn usage(&self, query: String) -> Answer<'_, UsageReport>;
}

/// The backend as provided in context.
pub type SharedBackend = Arc<dyn Backend>;
