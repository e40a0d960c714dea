//! Ray's job objects and Berth's jobs, both ways: a Ray submission as a Berth job request,
//! a Berth job as Ray's `JobDetails`, and Berth's field names in an error as the field the
//! Ray caller sent.
//!
//! The mapping: `metadata` entries are the job's labels (so a `team` key routes like a
//! `team` label); `entrypoint_num_cpus`/`_num_gpus` are `cpu`/`gpu`, `entrypoint_memory`
//! (bytes) is `memory_gb`, `entrypoint_resources` are custom resources by name; the
//! submission id is the job's name and a second id it can be read by. A request naming no
//! resource gets one CPU, as every Berth job does.

use std::collections::BTreeMap;

use app::jobs::{Event, Job, JobRequest, JobState, ResourceRequest, RuntimeEnv};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Bytes per GiB: Berth counts memory in GiB, Ray in bytes.
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Body of Ray's `POST /api/jobs/` (its `JobSubmitRequest`): unknown fields are refused, as
/// Ray refuses them.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    pub entrypoint: String,
    #[serde(default)]
    pub submission_id: Option<String>,
    /// Ray's deprecated name of `submission_id`.
    #[serde(default)]
    pub job_id: Option<String>,
    #[serde(default)]
    pub runtime_env: Option<RuntimeEnv>,
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub entrypoint_num_cpus: Option<f64>,
    #[serde(default)]
    pub entrypoint_num_gpus: Option<f64>,
    #[serde(default)]
    pub entrypoint_memory: Option<u64>,
    #[serde(default)]
    pub entrypoint_resources: Option<BTreeMap<String, f64>>,
    #[serde(default)]
    pub entrypoint_label_selector: Option<BTreeMap<String, String>>,
}

impl SubmitRequest {
    /// The Berth job request, or `field: problem` for what Berth cannot take.
    pub fn into_job_request(self) -> Result<JobRequest, String> {
        if self.entrypoint_label_selector.as_ref().is_some_and(|s| !s.is_empty()) {
            return Err("entrypoint_label_selector: not taken by Berth, which places jobs on the nodes of the flavors its \
                        scheduling rules route them to; put the key in `metadata` and route on it with a rule"
                .into());
        }
        // Ray reads 0 as "reserve none"; in Berth that is no request of that resource.
        let amount = |x: Option<f64>| x.filter(|v| *v != 0.0);
        let custom = self.entrypoint_resources.unwrap_or_default().into_iter().filter(|(_, v)| *v != 0.0).collect();
        Ok(JobRequest {
            submission_id: self.submission_id.or(self.job_id),
            entrypoint: self.entrypoint,
            runtime_env: self.runtime_env.unwrap_or_default(),
            labels: self.metadata.unwrap_or_default(),
            resources: ResourceRequest {
                cpu: amount(self.entrypoint_num_cpus),
                gpu: amount(self.entrypoint_num_gpus),
                memory_gb: amount(self.entrypoint_memory.map(|b| b as f64 / GIB)),
                custom,
            },
            ..JobRequest::default()
        })
    }
}

/// `message` with Berth's field names (`labels.team: …`) as the Ray caller sent them
/// (`metadata.team: …`).
pub fn in_ray_terms(message: &str) -> String {
    const FIELDS: [(&str, &str); 6] = [
        ("labels", "metadata"),
        ("resources.cpu", "entrypoint_num_cpus"),
        ("resources.gpu", "entrypoint_num_gpus"),
        ("resources.memory_gb", "entrypoint_memory"),
        ("resources.custom", "entrypoint_resources"),
        ("name", "submission_id"),
    ];
    for (berth, ray) in FIELDS {
        if let Some(rest) = message.strip_prefix(berth).filter(|r| r.starts_with(['.', ':'])) {
            return format!("{ray}{rest}");
        }
    }
    message.to_string()
}

/// Ray's answer to a submission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Submitted {
    /// Ray's deprecated copy of `submission_id`.
    pub job_id: String,
    pub submission_id: String,
}

/// A job as Ray's `JobDetails` (what `ray job status`/`list` and `get_job_info` read).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobDetails {
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Berth's id of the job.
    pub job_id: Option<String>,
    pub submission_id: String,
    pub driver_info: Option<Value>,
    pub status: &'static str,
    pub entrypoint: String,
    pub message: Option<String>,
    pub error_type: Option<String>,
    /// Submission time, epoch milliseconds (Ray sets it when the job is submitted).
    pub start_time: Option<i64>,
    pub end_time: Option<i64>,
    pub metadata: BTreeMap<String, String>,
    pub runtime_env: Map<String, Value>,
    pub driver_agent_http_address: Option<String>,
    /// The Berth node the job runs or ran on.
    pub driver_node_id: Option<String>,
    pub driver_exit_code: Option<i64>,
}

/// Ray's status word for a Berth state: admitted counts as pending (not started yet), a
/// cancel is a stop, a timeout or a refusal at submit a failure.
pub fn status(state: JobState) -> &'static str {
    match state {
        JobState::Pending | JobState::Admitted => "PENDING",
        JobState::Running => "RUNNING",
        JobState::Succeeded => "SUCCEEDED",
        JobState::Cancelled => "STOPPED",
        JobState::Failed | JobState::TimedOut | JobState::Rejected => "FAILED",
    }
}

/// Ray's record of `job`. Its `history` (when read one by one) tells why a job that ran
/// before waits again.
pub fn details(job: &Job) -> JobDetails {
    let (message, error_type) = message(job);
    let runtime_env = match serde_json::to_value(&job.runtime_env) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    JobDetails {
        kind: "SUBMISSION",
        job_id: Some(job.id.clone()),
        submission_id: job.submission_id.clone().unwrap_or_else(|| job.id.clone()),
        driver_info: None,
        status: status(job.state),
        entrypoint: job.entrypoint.clone(),
        message: Some(message),
        error_type,
        start_time: Some(job.submitted_at.timestamp_millis()),
        end_time: job.finished_at.map(|t| t.timestamp_millis()),
        metadata: job.labels.clone(),
        runtime_env,
        driver_agent_http_address: None,
        driver_node_id: job.node.clone(),
        driver_exit_code: job.exit_code,
    }
}

/// The status message and Ray's `error_type`.
fn message(job: &Job) -> (String, Option<String>) {
    let reason = job.reason.clone().unwrap_or_default();
    match job.state {
        JobState::Pending => (waiting(job), None),
        JobState::Admitted => (format!("Admitted by Berth to node {}; starting.", job.node.as_deref().unwrap_or("?")), None),
        JobState::Running => (format!("Job is currently running (Berth node {}, run {}).", job.node.as_deref().unwrap_or("?"), job.runs), None),
        JobState::Succeeded => ("Job finished successfully.".into(), None),
        JobState::Cancelled => (format!("Job was intentionally stopped ({reason})."), None),
        JobState::TimedOut => (format!("Job was stopped by Berth: {reason}."), Some("BERTH_TIMEOUT".into())),
        JobState::Rejected => (format!("Berth rejected the job: {reason}"), Some("BERTH_REJECTED".into())),
        JobState::Failed => match (job.exit_code, ray_error_type(&reason)) {
            (_, Some(kind)) => (reason.clone(), Some(kind)),
            (Some(code), None) => (format!("Job entrypoint command failed with exit code {code}."), Some("JOB_ENTRYPOINT_COMMAND_ERROR".into())),
            (None, None) => (format!("Job failed: {reason}"), Some("JOB_ENTRYPOINT_COMMAND_START_ERROR".into())),
        },
    }
}

/// `KIND` of a reason `KIND: message` that came from Ray (the Ray backend's failures).
fn ray_error_type(reason: &str) -> Option<String> {
    let (kind, _) = reason.split_once(": ")?;
    (kind.len() > 3 && kind.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')).then(|| kind.to_string())
}

/// Why a pending job waits, and, when it ran before, what became of that run.
fn waiting(job: &Job) -> String {
    let queue = job.queue.as_deref().unwrap_or("?");
    let place = match job.position {
        Some(p) => format!("waiting in Berth's queue {queue} at position {p}"),
        None => format!("waiting in Berth's queue {queue}"),
    };
    let why = job.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
    if job.runs == 0 {
        return format!("Job has not started yet; {place}{why}.");
    }
    let before = match last_ending(&job.history) {
        Some(e) if e.kind == "preempted" => format!("Run {} was STOPPED by Berth ({}) and the job was requeued", job.runs, e.message),
        Some(e) if e.kind == "retried" => format!("Run {} failed ({}) and the job was requeued", job.runs, e.message),
        Some(e) => format!("Run {} could not start ({}) and the job was requeued", job.runs, e.message),
        None => format!("Run {} ended and the job was requeued", job.runs),
    };
    format!("{before}; {place}{why}.")
}

/// The last event that sent a job that had run back to its queue.
fn last_ending(history: &[Event]) -> Option<&Event> {
    history.iter().rev().find(|e| matches!(e.kind.as_str(), "preempted" | "retried" | "requeued"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(state: JobState) -> Job {
        let t = chrono::DateTime::from_timestamp_millis(1_796_216_521_787).unwrap();
        Job {
            id: "j-1".into(),
            submission_id: Some("train-1".into()),
            name: "train-1".into(),
            submitter: "ann".into(),
            state,
            entrypoint: "python train.py".into(),
            runtime_env: RuntimeEnv { working_dir: Some("gcs://_ray_pkg_ab.zip".into()), ..Default::default() },
            labels: BTreeMap::from([("team".into(), "ml".into())]),
            resources: ResourceRequest::default(),
            priority: 0,
            requested_priority: None,
            timeout_s: 0,
            max_retries: 0,
            retries: 0,
            runs: 0,
            stage_id: None,
            queue: Some("ml".into()),
            rule_index: Some(0),
            config_version: Some(1),
            flavors: vec![],
            node: None,
            backend: None,
            submitted_at: t,
            enqueued_at: t,
            admitted_at: None,
            started_at: None,
            finished_at: None,
            exit_code: None,
            reason: None,
            reason_headline: None,
            position: None,
            outputs: vec![],
            after_ok: vec![],
            after_any: vec![],
            after_not_ok: vec![],
            held_by: None,
            dependents: vec![],
            history: vec![],
        }
    }

    #[test]
    fn a_ray_submission_becomes_a_berth_request() {
        let body = json!({
            "entrypoint": "python train.py", "submission_id": "train-1",
            "runtime_env": {"working_dir": "gcs://_ray_pkg_ab.zip", "env_vars": {"A": "1"}, "pip": ["x"]},
            "metadata": {"team": "ml"}, "entrypoint_num_cpus": 2, "entrypoint_num_gpus": 0,
            "entrypoint_memory": 536870912, "entrypoint_resources": {"accel": 1},
        });
        let req: SubmitRequest = serde_json::from_value(body).unwrap();
        let r = req.into_job_request().unwrap();
        assert_eq!(r.submission_id.as_deref(), Some("train-1"));
        assert_eq!(r.labels["team"], "ml");
        assert_eq!((r.resources.cpu, r.resources.gpu, r.resources.memory_gb), (Some(2.0), None, Some(0.5)));
        assert_eq!(r.resources.custom["accel"], 1.0);
        assert_eq!(r.runtime_env.env_vars["A"], "1");
        assert_eq!(r.runtime_env.other["pip"], json!(["x"]));
        let unknown = serde_json::from_value::<SubmitRequest>(json!({"entrypoint": "x", "colour": "red"})).unwrap_err();
        assert!(unknown.to_string().contains("colour"), "{unknown}");
        let sel: SubmitRequest = serde_json::from_value(json!({"entrypoint": "x", "entrypoint_label_selector": {"pool": "a"}})).unwrap();
        assert!(sel.into_job_request().unwrap_err().starts_with("entrypoint_label_selector:"));
    }

    #[test]
    fn field_names_are_said_as_the_ray_caller_sent_them() {
        assert_eq!(in_ray_terms("labels.team: at most 256 bytes"), "metadata.team: at most 256 bytes");
        assert_eq!(in_ray_terms("resources.cpu: must be a number ≥ 0, got -1"), "entrypoint_num_cpus: must be a number ≥ 0, got -1");
        assert_eq!(in_ray_terms("resources.custom.tpu: at most 1000000000"), "entrypoint_resources.tpu: at most 1000000000");
        assert_eq!(in_ray_terms("entrypoint: must not be empty"), "entrypoint: must not be empty");
        assert_eq!(in_ray_terms("namespace: x"), "namespace: x");
    }

    #[test]
    fn states_and_messages_read_as_ray_says_them() {
        let mut j = job(JobState::Pending);
        j.position = Some(2);
        j.reason = Some("queue ml: cpu 2 of quota 2 in use".into());
        let d = details(&j);
        assert_eq!((d.status, d.submission_id.as_str(), d.job_id.as_deref()), ("PENDING", "train-1", Some("j-1")));
        assert_eq!(d.message.as_deref(), Some("Job has not started yet; waiting in Berth's queue ml at position 2: queue ml: cpu 2 of quota 2 in use."));
        assert_eq!(d.start_time, Some(1_796_216_521_787));
        assert_eq!(d.metadata["team"], "ml");
        assert_eq!(d.runtime_env["working_dir"], "gcs://_ray_pkg_ab.zip");

        // Preempted and requeued: pending again, the stop said in the message.
        j.runs = 1;
        j.history = vec![Event {
            seq: 9,
            at: j.submitted_at,
            kind: "preempted".into(),
            job_id: Some("j-1".into()),
            queue: None,
            flavor: None,
            node: None,
            config_version: None,
            rule_index: None,
            message: "preempted by j-2 (priority 9 > 0)".into(),
            detail: Value::Null,
            job_name: None,
        }];
        let m = details(&j).message.unwrap();
        assert!(m.starts_with("Run 1 was STOPPED by Berth (preempted by j-2 (priority 9 > 0)) and the job was requeued; waiting"), "{m}");

        let mut f = job(JobState::Failed);
        f.exit_code = Some(3);
        let d = details(&f);
        assert_eq!((d.status, d.error_type.as_deref(), d.driver_exit_code), ("FAILED", Some("JOB_ENTRYPOINT_COMMAND_ERROR"), Some(3)));
        f.exit_code = None;
        f.reason = Some("JOB_SUPERVISOR_ACTOR_START_FAILURE: bad working_dir".into());
        assert_eq!(details(&f).error_type.as_deref(), Some("JOB_SUPERVISOR_ACTOR_START_FAILURE"));
        let mut c = job(JobState::Cancelled);
        c.reason = Some("cancelled by ann".into());
        assert_eq!((details(&c).status, details(&c).message.unwrap().as_str()), ("STOPPED", "Job was intentionally stopped (cancelled by ann)."));
        assert_eq!(details(&job(JobState::TimedOut)).status, "FAILED");
        assert_eq!(details(&job(JobState::Admitted)).status, "PENDING");
        // Fields exactly as Ray's JobDetails has them.
        let v = serde_json::to_value(details(&job(JobState::Succeeded))).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["type", "job_id", "submission_id", "driver_info", "status", "entrypoint", "message", "error_type", "start_time", "end_time",
             "metadata", "runtime_env", "driver_agent_http_address", "driver_node_id", "driver_exit_code"]
        );
    }
}
