//! Following a job as a shell follows a command: `berth jobs submit --wait` and `berth jobs
//! logs -f` print its stdout and stderr (stderr lines marked) until it ends, then exit with
//! its code. One table of exit codes, so scripts can tell the endings apart:
//!
//! | ending | exit code |
//! |---|---|
//! | succeeded | 0 |
//! | failed | the job's own exit code (1 when it has none, e.g. its start failed) |
//! | timed out | 124 (as `timeout(1)`) |
//! | cancelled | 130 (as a command stopped by Ctrl-C) |
//! | rejected | 65 |
//!
//! 1 is also what a failed request gives (server unreachable, job unknown), with `error:`.

use std::io::Write;

use std::time::Duration;

use app::jobs::{Job, JobState, StageStatus};

use crate::cli::client::{encode, Client, ClientError};

/// Exit code of a timed-out job.
pub const TIMED_OUT: i32 = 124;
/// Exit code of a cancelled job.
pub const CANCELLED: i32 = 130;
/// Exit code of a job rejected at submit.
pub const REJECTED: i32 = 65;

/// The exit code that stands for how `job` ended (0 while it has not).
pub fn exit_code(job: &Job) -> i32 {
    match job.state {
        JobState::Failed => job.exit_code.filter(|c| (1..=255).contains(c)).map_or(1, |c| c as i32),
        JobState::TimedOut => TIMED_OUT,
        JobState::Cancelled => CANCELLED,
        JobState::Rejected => REJECTED,
        _ => 0,
    }
}

/// One line saying why `job` did not succeed, for standard error; `None` when it did (or
/// has not ended).
pub fn ending_line(job: &Job) -> Option<String> {
    let how = match job.state {
        JobState::Failed if job.reason.is_none() => format!("failed with exit code {}", job.exit_code.unwrap_or(1)),
        JobState::Failed => "failed".to_string(),
        JobState::TimedOut => format!("timed out after {} s", job.timeout_s),
        JobState::Cancelled => "was cancelled".to_string(),
        JobState::Rejected => "was rejected".to_string(),
        _ => return None,
    };
    let why = job.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
    Some(format!("berth: job {} {how}{why}", job.id))
}

/// Prints job `id`'s log (both streams) as it grows until the job ends, then its ending
/// line; returns its exit code (see the table above).
pub async fn follow(client: &Client, id: &str) -> Result<i32, ClientError> {
    let mut out = std::io::stdout();
    let query = [("stream", "both".to_string()), ("follow", "true".to_string())];
    client
        .logs(id, &query, |chunk| {
            let _ = out.write_all(chunk);
            let _ = out.flush();
        })
        .await?;
    ended(client, id).await
}

/// Job `id` as it is now: its ending line on standard error, and its exit code.
pub async fn ended(client: &Client, id: &str) -> Result<i32, ClientError> {
    let job: Job = client.get_json(&format!("/api/v1/jobs/{}", encode(id)), &[]).await?;
    if let Some(line) = ending_line(&job) {
        eprintln!("{line}");
    }
    Ok(exit_code(&job))
}

/// Waits for every job of stage `id` (an array) to end; prints its counts, and returns 0
/// when all succeeded, else the code of the first that did not (with its ending line).
pub async fn stage(client: &Client, id: &str) -> Result<i32, ClientError> {
    let path = format!("/api/v1/stages/{}", encode(id));
    let status = loop {
        let s: StageStatus = client.get_json(&path, &[]).await?;
        if s.done {
            break s;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let counts: Vec<String> = status.counts.iter().map(|(k, v)| format!("{k}={v}")).collect();
    eprintln!("berth: stage {}: {}", status.id, counts.join(" "));
    match status.jobs.iter().find(|j| j.state != JobState::Succeeded) {
        None => Ok(0),
        Some(j) => ended(client, &j.id).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(state: JobState, exit_code: Option<i64>) -> Job {
        let mut j: Job = serde_json::from_value(serde_json::json!({
            "id": "j-1", "name": "n", "submitter": "s", "state": "pending", "entrypoint": "true",
            "runtime_env": {}, "labels": {}, "resources": {}, "priority": 0, "timeout_s": 5,
            "max_retries": 0, "retries": 0, "runs": 1,
            "submitted_at": "2026-12-05T00:00:00Z", "enqueued_at": "2026-12-05T00:00:00Z"
        }))
        .unwrap();
        j.state = state;
        j.exit_code = exit_code;
        j
    }

    #[test]
    fn each_ending_has_its_own_code() {
        assert_eq!(exit_code(&job(JobState::Succeeded, Some(0))), 0);
        assert_eq!(exit_code(&job(JobState::Failed, Some(3))), 3);
        assert_eq!(exit_code(&job(JobState::Failed, None)), 1);
        assert_eq!(exit_code(&job(JobState::Failed, Some(-9))), 1);
        assert_eq!(exit_code(&job(JobState::TimedOut, None)), TIMED_OUT);
        assert_eq!(exit_code(&job(JobState::Cancelled, None)), CANCELLED);
        assert_eq!(exit_code(&job(JobState::Rejected, None)), REJECTED);
        assert!(ending_line(&job(JobState::Succeeded, Some(0))).is_none());
        assert_eq!(ending_line(&job(JobState::TimedOut, None)).unwrap(), "berth: job j-1 timed out after 5 s");
    }
}
