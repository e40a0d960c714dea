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

use std::io;
use std::path::{Path, PathBuf};

use serde_json::Value;

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
