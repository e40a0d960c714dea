//! A stage's progress and results: each job's status, exit code, log tails and declared
//! outputs, read from its working directory.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use app::jobs::{JobResult, JobState, StageResults, StageStatus};

use super::{Runtime, RuntimeError};
use crate::admission::Settings;
use crate::backends::{local, Registry, RunId, Stream};
use crate::store::jobs::JobRow;

impl Runtime {
    /// A stage's progress.
    pub async fn stage(&self, id: &str) -> Result<StageStatus, RuntimeError> {
        Ok(self.store.stage(id).await?.ok_or_else(|| RuntimeError::StageNotFound(id.to_string()))?.0)
    }

    /// A stage's results: each job's status, exit code, log tails and declared outputs.
    pub async fn stage_results(&self, id: &str) -> Result<StageResults, RuntimeError> {
        const TAIL: u64 = 64 * 1024;
        let (status, rows) = self.store.stage(id).await?.ok_or_else(|| RuntimeError::StageNotFound(id.to_string()))?;
        let mut job_statuses = Vec::with_capacity(rows.len());
        let mut artifacts = BTreeMap::new();
        let mut names_seen = HashSet::new();
        for row in &rows {
            let (stdout, stderr) = if row.runs > 0 {
                let out = self.logs(&row.id, Stream::Stdout, Some(TAIL)).await.map(|l| l.0).unwrap_or_default();
                let err = self.logs(&row.id, Stream::Stderr, Some(TAIL)).await.map(|l| l.0).unwrap_or_default();
                (String::from_utf8_lossy(&out).into_owned(), String::from_utf8_lossy(&err).into_owned())
            } else {
                (String::new(), String::new())
            };
            let outputs = collect_outputs(row, &self.settings, &self.backends);
            let prefix = if names_seen.insert(row.name.clone()) { row.name.clone() } else { row.id.clone() };
            for (path, content) in &outputs {
                artifacts.insert(format!("{prefix}/{path}"), content.clone());
            }
            job_statuses.push(JobResult {
                job_id: row.id.clone(),
                name: row.name.clone(),
                status: seed_status(row.state).into(),
                state: row.state,
                return_code: row.exit_code,
                reason: row.reason.clone().filter(|_| row.state == JobState::Rejected),
                stdout,
                stderr,
                outputs,
            });
        }
        let failed: Vec<&JobResult> = job_statuses.iter().filter(|j| j.state.is_terminal() && j.state != JobState::Succeeded).collect();
        let error_message = match (status.done, failed.len()) {
            (false, _) => Some("the stage is still running".to_string()),
            (true, 0) => None,
            (true, n) => Some(format!("{n} of {} jobs did not succeed", job_statuses.len())),
        };
        Ok(StageResults {
            stage_id: status.id,
            stage_name: status.name,
            success: status.done && failed.is_empty(),
            job_statuses,
            artifacts,
            error_message,
        })
    }
}

/// Seed 002's status words.
fn seed_status(state: JobState) -> &'static str {
    match state {
        JobState::Pending | JobState::Admitted => "queued",
        JobState::Running => "running",
        JobState::Succeeded => "completed",
        JobState::Failed | JobState::TimedOut | JobState::Rejected => "failed",
        JobState::Cancelled => "cancelled",
    }
}

/// Reads a finished job's declared outputs from its working directory (text, at most 1 MiB
/// each); a missing or unreadable file becomes `{"error": …}`.
fn collect_outputs(row: &JobRow, settings: &Settings, backends: &Registry) -> BTreeMap<String, serde_json::Value> {
    const MAX: u64 = 1024 * 1024;
    let mut out = BTreeMap::new();
    if row.spec.outputs.is_empty() || row.runs == 0 {
        return out;
    }
    let run = RunId { job: row.id.as_str().into(), run: row.runs };
    let dir = match &row.spec.runtime_env.working_dir {
        Some(d) => PathBuf::from(d),
        None => row
            .backend
            .as_deref()
            .and_then(|b| backends.get(b))
            .and_then(|b| b.default_work_dir(&run))
            .unwrap_or_else(|| local::default_work_dir(&settings.data_dir, &run)),
    };
    for path in &row.spec.outputs {
        let full = dir.join(path);
        let value = match std::fs::metadata(&full) {
            Ok(m) if m.len() > MAX => serde_json::json!({"error": format!("{} bytes, more than the 1 MiB bound", m.len())}),
            Ok(_) => match std::fs::read(&full) {
                Ok(bytes) => serde_json::Value::String(String::from_utf8_lossy(&bytes).into_owned()),
                Err(e) => serde_json::json!({"error": e.to_string()}),
            },
            Err(e) => serde_json::json!({"error": format!("{}: {e}", full.display())}),
        };
        out.insert(path.clone(), value);
    }
    out
}
