//! Wire types of stages: a stage request, its status, results and refusals.

use super::*;

/// Parallelism of a stage (seed 002).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Parallelism {
    /// At most this many of the stage's jobs admitted or running at once; 0 = no limit.
    #[serde(default)]
    pub max_concurrent: u32,
    /// Retries of each failed job (overrides the jobs' `max_retries` when set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_max: Option<u32>,
    /// Timeout of each job in seconds (overrides the jobs' `timeout_s` when set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_sec: Option<u64>,
}

/// Body of `POST /api/v1/stages`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageRequest {
    pub name: String,
    pub jobs: Vec<JobRequest>,
    #[serde(default)]
    pub parallelism: Parallelism,
}

/// `GET /api/v1/stages/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageStatus {
    pub id: String,
    pub name: String,
    pub submitter: String,
    pub created_at: DateTime<Utc>,
    pub parallelism: Parallelism,
    /// Jobs per state (states with no job left out).
    pub counts: BTreeMap<String, u64>,
    /// True when every job has ended.
    pub done: bool,
    pub jobs: Vec<StageJob>,
}

/// A job's line in a stage's status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageJob {
    pub id: String,
    pub name: String,
    pub state: JobState,
}

/// One job's result in `GET /api/v1/stages/{id}/results` (seed 002's JobStatus).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobResult {
    pub job_id: String,
    pub name: String,
    /// Seed 002's words: `queued`, `running`, `completed`, `failed`, `cancelled`.
    pub status: String,
    pub state: JobState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_code: Option<i64>,
    /// Why the job was rejected at submit (rejected jobs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub stdout: String,
    pub stderr: String,
    /// Declared output files: path → content (text, bounded), or an `error`.
    pub outputs: BTreeMap<String, serde_json::Value>,
}

/// `GET /api/v1/stages/{id}/results` (seed 002's StageExecutionResult).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageResults {
    pub stage_id: String,
    pub stage_name: String,
    pub job_statuses: Vec<JobResult>,
    /// Every job's outputs, keyed `job name/path`.
    pub artifacts: BTreeMap<String, serde_json::Value>,
    pub success: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
}

/// Reply of a stage submission.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageCreated {
    pub stage_id: String,
    pub job_ids: Vec<String>,
    /// Jobs refused at submit, by index in the request, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<StageRejection>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageRejection {
    pub index: usize,
    pub job_id: String,
    pub reason: String,
}
