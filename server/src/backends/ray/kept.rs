//! Finished Ray runs as Berth keeps them once Ray has forgotten them.
//!
//! Ray keeps every finished job (its record in the GCS, listed by every `GET /api/jobs/`)
//! until it restarts; nothing bounds that history. So once a run has ended, the Ray backend
//! saves the run's log (its last [`RayConfig::kept_log_bytes`](super::RayConfig)) and Ray's
//! final status record in `data_dir/runs/{key}/` (`stdout` and `ray.json`, as the local
//! backend lays out its runs) and then deletes the job from Ray. The log is written first
//! and the record last, each through a rename, so a record on disk means a complete copy:
//! logs are read from it, and a server restarting after the delete still learns how the
//! run ended from it.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::tasks::{ToDelete, GIVE_UP, SETTLE};
use super::{Failure, RayBackend};

/// Where a run's copy lives.
fn dir(root: &Path, key: &str) -> PathBuf {
    root.join("runs").join(key)
}

/// Writes `bytes` to `path` through a temporary file and a rename.
fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// The last `limit` bytes of `log`.
pub(super) fn tail(log: &[u8], limit: u64) -> &[u8] {
    let from = log.len().saturating_sub(usize::try_from(limit).unwrap_or(usize::MAX));
    &log[from..]
}

/// Saves a finished run: its log, then Ray's record of it.
pub(super) fn save(root: &Path, key: &str, log: &[u8], record: &Value) -> io::Result<()> {
    let dir = dir(root, key);
    std::fs::create_dir_all(&dir)?;
    write_atomic(&dir.join("stdout"), log)?;
    write_atomic(&dir.join("ray.json"), record.to_string().as_bytes())
}

/// Ray's final record of a saved run; `None` when none was saved (or it does not parse).
pub(super) fn record(root: &Path, key: &str) -> Option<Value> {
    let text = std::fs::read_to_string(dir(root, key).join("ray.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// The last `tail` bytes (all, for `None`) of a saved run's log; `None` unless the run was
/// saved completely.
pub(super) fn log(root: &Path, key: &str, tail_bytes: Option<u64>) -> Option<Vec<u8>> {
    record(root, key)?;
    let log = std::fs::read(dir(root, key).join("stdout")).ok()?;
    Some(tail_bytes.map_or(log.as_slice(), |t| tail(&log, t)).to_vec())
}

impl RayBackend {
    /// The saved log of an ended run, if it was saved.
    pub(super) async fn kept_log(&self, key: &str, tail: Option<u64>) -> Option<Vec<u8>> {
        let root = self.cfg.keep_dir.clone()?;
        let key = key.to_string();
        tokio::task::spawn_blocking(move || log(&root, &key, tail)).await.ok().flatten()
    }

    /// Ray's final record of an ended run, if it was saved.
    pub(super) async fn kept_record(&self, key: &str) -> Option<Value> {
        let root = self.cfg.keep_dir.clone()?;
        let key = key.to_string();
        tokio::task::spawn_blocking(move || record(&root, &key)).await.ok().flatten()
    }

    /// Saves an ended run's log and Ray's record of it; whether it did. On failure the job
    /// stays in Ray (as without a keep dir) and its logs are read there.
    pub(super) async fn save_ended(&self, key: &str, record: Value) -> bool {
        let Some(root) = self.cfg.keep_dir.clone() else { return false };
        let log = match self.get_json(&format!("/api/jobs/{key}/logs")).await {
            Ok(body) => body.get("logs").and_then(Value::as_str).unwrap_or_default().to_string(),
            Err(f) => {
                tracing::warn!(run = %key, error = %self.describe(&f), "cannot read an ended run's log from Ray; leaving the job in Ray");
                return false;
            }
        };
        let limit = self.cfg.kept_log_bytes;
        let owned = key.to_string();
        match tokio::task::spawn_blocking(move || save(&root, &owned, tail(log.as_bytes(), limit), &record)).await {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                tracing::warn!(run = %key, error = %e, "cannot save an ended run's log; leaving the job in Ray");
                false
            }
            Err(e) => {
                tracing::warn!(run = %key, error = %e, "saving an ended run's log failed; leaving the job in Ray");
                false
            }
        }
    }

    /// One look at the saved runs waiting to be deleted from Ray: deletes those that ended
    /// at least [`SETTLE`] ago, in the order they ended. One that Ray cannot delete now is
    /// tried again at the next look, and left in Ray after [`GIVE_UP`].
    pub(super) async fn delete_settled(&self, waiting: &mut VecDeque<ToDelete>) {
        while let Some(w) = waiting.front() {
            if w.since.elapsed() < SETTLE {
                return; // the rest ended later still
            }
            let w = waiting.pop_front().expect("looked at above");
            match self.send(self.http.delete(format!("{}/api/jobs/{}", self.base, w.key))).await {
                Ok(_) | Err(Failure::Status(404, _)) => tracing::debug!(run = %w.key, "ended run saved and deleted from Ray"),
                Err(f) if w.since.elapsed() < GIVE_UP => {
                    tracing::debug!(run = %w.key, error = %self.describe(&f), "cannot delete an ended run from Ray now; trying again");
                    waiting.push_front(w);
                    return;
                }
                Err(f) => tracing::warn!(run = %w.key, error = %self.describe(&f), "cannot delete an ended run from Ray (its copy is saved); leaving it there"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_saved_run_gives_back_its_log_and_record() {
        let root = std::env::temp_dir().join(format!("berth-kept-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(record(&root, "j-1-r1"), None);
        assert_eq!(log(&root, "j-1-r1", None), None);
        let rec = json!({"status": "SUCCEEDED", "end_time": 5});
        save(&root, "j-1-r1", b"hello\nworld\n", &rec).unwrap();
        assert_eq!(record(&root, "j-1-r1"), Some(rec));
        assert_eq!(log(&root, "j-1-r1", None).as_deref(), Some(&b"hello\nworld\n"[..]));
        assert_eq!(log(&root, "j-1-r1", Some(6)).as_deref(), Some(&b"world\n"[..]));
        // A log without its record is an interrupted save: not a copy to trust.
        std::fs::remove_file(root.join("runs/j-1-r1/ray.json")).unwrap();
        assert_eq!(log(&root, "j-1-r1", None), None);
        // A record that is not JSON is no record.
        std::fs::write(root.join("runs/j-1-r1/ray.json"), "{not json").unwrap();
        assert_eq!(record(&root, "j-1-r1"), None);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn tails_are_bounded() {
        assert_eq!(tail(b"abcdef", 2), b"ef");
        assert_eq!(tail(b"abc", 10), b"abc");
        assert_eq!(tail(b"abc", 0), b"");
    }
}
