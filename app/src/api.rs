//! Wire types of the REST API, shared by the server, the CLI and the dashboard.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::config::{Problem, SchedulerConfig};

/// Largest page any list gives (jobs, events, config versions, the audit log), whoever asks:
/// the REST API, the dashboard or the CLI.
pub const MAX_PAGE: i64 = 1000;

/// The page size asked for as `max_items`, else `default`; `max_items: …` when it is out
/// of bounds.
pub fn page_size(max_items: Option<i64>, default: i64) -> Result<i64, String> {
    let n = max_items.unwrap_or(default);
    if !(1..=MAX_PAGE).contains(&n) {
        return Err(format!("max_items: must be between 1 and {MAX_PAGE}, got {n}"));
    }
    Ok(n)
}
use crate::jobs::Job;

/// One stored config version, with its config (`GET /api/v1/scheduler/config`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigVersion {
    pub version: i64,
    pub is_active: bool,
    pub created_at: DateTime<Utc>,
    pub creator_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub config: SchedulerConfig,
    /// On the active version only, when the server cannot run it (stored by an older build):
    /// what is wrong and which version runs instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_in_force: Option<String>,
}

/// A version without its config (`GET /api/v1/scheduler/config/versions`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionSummary {
    pub version: i64,
    pub is_active: bool,
    pub created_at: DateTime<Utc>,
    pub creator_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A page of version summaries, newest first; `next_cursor` fetches the next page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionPage {
    pub versions: Vec<VersionSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Body of `POST /api/v1/scheduler/config` when sent as JSON with metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApplyRequest {
    pub config: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_active_version: Option<i64>,
}

/// Result of an apply or a rollback.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApplyResponse {
    pub version: i64,
    /// False when the applied config equals the previously active one.
    pub changed: bool,
    /// Warnings of the validator: allowed, but worth a look.
    #[serde(default)]
    pub warnings: Vec<crate::config::Problem>,
}

/// Error body of every failed request: `{"error": {code, message, details}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// The error itself; `details` carries e.g. the list of validation problems.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorDetail {
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub details: serde_json::Value,
}

// The dashboard's server functions answer with these (see `ui::server_fns`).

/// Why, and on top of which version (a mismatch is a conflict, never an overwrite). The
/// author is whoever is signed in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApplyInput {
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

/// What became of a submission from the dashboard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SubmitOutcome {
    Submitted(Box<Job>),
    /// Recorded as `rejected`; the job carries the reason.
    Rejected(Box<Job>),
    /// Bad input: `field: problem`; nothing was recorded.
    Invalid(String),
}

/// A chart for ECharts, described with charming on the server: the option as JSON, and how
/// many points it carries (an empty chart says so instead of drawing blank axes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChartData {
    pub option: String,
    pub points: usize,
    /// The range the data covers and the step it was downsampled to, for the caption.
    pub step_s: f64,
    /// What it shows, in words ("CPU", "Waiting time before admission").
    #[serde(default)]
    pub title: String,
    /// The legend, drawn by the page under the chart (it wraps on a phone, where ECharts'
    /// own legend pages or overlaps the axis).
    #[serde(default)]
    pub legend: Vec<LegendEntry>,
    /// Series left out because they were zero over the whole range.
    #[serde(default)]
    pub hidden: Vec<String>,
    /// What to say instead of the chart when it has nothing to draw.
    #[serde(default)]
    pub empty: String,
    /// A line under the chart summing up the range ("p50 4 s · p95 1 m 2 s over 37 jobs").
    #[serde(default)]
    pub caption: String,
}

/// One series in a chart's legend: its name, colour and line (`solid`, `dashed`, `dotted`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LegendEntry {
    pub name: String,
    pub colour: String,
    pub line: String,
}
