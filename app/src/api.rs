//! Wire types of the REST API, shared by the server, the CLI and the dashboard.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::config::SchedulerConfig;

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
