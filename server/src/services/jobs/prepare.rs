//! A request becomes a job row: checked, routed by the config in force and checked against
//! the nodes, pending or rejected with why.

use app::jobs::{JobRequest, JobState};

use super::RuntimeError;
use crate::admission::Settings;
use crate::clock::new_id;
use crate::engine::{self, Compiled, Node};
use crate::services::request;
use crate::store::jobs::JobRow;

/// Refuses a working dir outside the allowed roots (a package or remote URI is no path on
/// this host).
pub(super) fn check_workdir(settings: &Settings, req: &JobRequest) -> Result<(), RuntimeError> {
    match &req.runtime_env.working_dir {
        Some(dir) if !app::request::is_uri(dir) => request::workdir_allowed(&settings.workdir_roots, dir).map_err(RuntimeError::Invalid),
        _ => Ok(()),
    }
}

/// A job row ready to store: pending with its queue and priority, or rejected with why,
/// routed by `compiled` (version `version`) and checked against `nodes`.
pub fn prepare(compiled: &Compiled, version: i64, nodes: &[Node], req: JobRequest, submitter: &str, stage: Option<&str>, now: i64) -> Result<JobRow, RuntimeError> {
    prepare_coded(compiled, version, nodes, req, submitter, stage, now).map(|(row, _)| row)
}

/// [`prepare`], with the rejection's code (a metric's label) when the job is refused.
pub(super) fn prepare_coded(
    compiled: &Compiled,
    version: i64,
    nodes: &[Node],
    mut req: JobRequest,
    submitter: &str,
    stage: Option<&str>,
    now: i64,
) -> Result<(JobRow, Option<&'static str>), RuntimeError> {
    // A request naming no resource at all gets one CPU (like Slurm's default), so
    // `berth jobs submit -- cmd` just works; an explicit zero is still refused.
    if req.resources.iter().next().is_none() {
        req.resources.cpu = Some(1.0);
    }
    let request = request::check(&req).map_err(RuntimeError::Invalid)?;
    let name = req.name.take().or_else(|| req.submission_id.clone()).unwrap_or_else(|| request::default_name(&req.entrypoint));
    let priority = req.priority.unwrap_or(0);
    let mut row = JobRow { stage_id: stage.map(str::to_string), ..JobRow::submitted(new_id("j"), name, submitter.to_string(), req, priority, version, now) };
    let routed = engine::route(compiled, &row.spec.labels, row.spec.priority)
        .and_then(|r| engine::check_submittable(compiled, nodes, &r.queue, &request).map(|()| r));
    match routed {
        Ok(r) => {
            row.queue = Some(r.queue.to_string());
            row.rule_index = r.rule_index.map(|i| i as i64);
            row.priority = r.priority;
        }
        Err(rejection) => {
            if let Ok(r) = engine::route(compiled, &row.spec.labels, row.spec.priority) {
                row.queue = Some(r.queue.to_string());
                row.rule_index = r.rule_index.map(|i| i as i64);
            }
            row.state = JobState::Rejected;
            row.finished_at_us = Some(now);
            row.reason = Some(rejection.reason);
            return Ok((row, Some(rejection.code)));
        }
    }
    Ok((row, None))
}
