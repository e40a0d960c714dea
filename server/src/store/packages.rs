//! Uploaded packages (what `ray job submit --working-dir` and `py_modules` upload, named
//! `_ray_pkg_<hash>.zip` by Ray's client): a row each in `packages`, the bytes in the data
//! dir, stored by content.
//!
//! Layout under `data_dir/packages/`: `blobs/<sha256>.zip` holds each distinct content once;
//! `by-name/<name>` is a hard link to its blob, the path backends read ([`file_of`]). A
//! name always means the same bytes: uploading other bytes under a taken name is refused.
//! Garbage collection ([`PackageStore::collect`]) removes packages unused for a while that no
//! unfinished job names, then blobs no package links to any more.

use std::path::{Path, PathBuf};
use std::time::Duration;

use app::jobs::JobRequest;
use sha2::{Digest, Sha256};
use sqlx::Row;

use crate::store::Db;

/// Package store failures.
#[derive(Debug, thiserror::Error)]
pub enum PackageStoreError {
    /// The name is taken by other bytes.
    #[error("package {name} already exists with different content (sha256 {existing}); Ray names a package by its content, so upload it under the name Ray's client computes")]
    Conflict { name: String, existing: String },
    #[error("package storage: {0}")]
    Io(String),
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
}

type Result<T, E = PackageStoreError> = std::result::Result<T, E>;

/// One stored package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    pub name: String,
    pub sha256: String,
    pub size_bytes: i64,
}

/// What an upload did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    Stored,
    /// The same bytes were there already under this name.
    Unchanged,
}

/// What a garbage collection removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Collected {
    pub packages: usize,
    pub blobs: usize,
    pub bytes: u64,
}

/// A blob no package links to is only removed once it is this old: an upload writes its
/// blob a moment before it links its name to it.
const ORPHAN_AGE: Duration = Duration::from_secs(600);

/// The file backends read for package `name` (`_ray_pkg_<hex>.zip`), absolute.
pub fn file_of(data_dir: &Path, name: &str) -> PathBuf {
    let dir = std::path::absolute(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
    dir.join("packages").join("by-name").join(name)
}

/// Packages in the database, bytes under `data_dir/packages/`.
#[derive(Debug, Clone)]
pub struct PackageStore {
    db: Db,
    data_dir: PathBuf,
    /// Held by each upload, so two uploads of one name cannot link it to different bytes.
    uploads: std::sync::Arc<tokio::sync::Mutex<()>>,
}

fn io(what: &str, path: &Path, e: std::io::Error) -> PackageStoreError {
    PackageStoreError::Io(format!("{what} {}: {e}", path.display()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl PackageStore {
    pub fn new(db: Db, data_dir: PathBuf) -> PackageStore {
        let data_dir = std::path::absolute(&data_dir).unwrap_or(data_dir);
        PackageStore { db, data_dir, uploads: Default::default() }
    }

    fn blob(&self, sha256: &str) -> PathBuf {
        self.data_dir.join("packages").join("blobs").join(format!("{sha256}.zip"))
    }

    /// Stores `bytes` as package `name` (already checked to be a package name), uploaded by
    /// `by` at `now_us`.
    pub async fn put(&self, name: &str, bytes: Vec<u8>, by: &str, now_us: i64) -> Result<Put> {
        let sha256 = hex(&Sha256::digest(&bytes));
        let _one_at_a_time = self.uploads.lock().await;
        if let Some(existing) = self.get(name).await? {
            return self.same(name, &existing.sha256, &sha256, now_us).await;
        }
        let (blob, link) = (self.blob(&sha256), file_of(&self.data_dir, name));
        tokio::task::spawn_blocking(move || write_linked(&blob, &link, &bytes))
            .await
            .map_err(|e| PackageStoreError::Io(e.to_string()))??;
        let size = i64::try_from(std::fs::metadata(self.blob(&sha256)).map(|m| m.len()).unwrap_or(0)).unwrap_or(i64::MAX);
        let inserted = sqlx::query(
            "INSERT INTO packages (name, sha256, size_bytes, uploaded_by, uploaded_at_us, used_at_us) VALUES ($1, $2, $3, $4, $5, $5) \
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(&sha256)
        .bind(size)
        .bind(by)
        .bind(now_us)
        .execute(&self.db.pool)
        .await?;
        if inserted.rows_affected() == 0 {
            // Another server on this database stored the name meanwhile.
            let existing = self.get(name).await?.map(|p| p.sha256).unwrap_or_default();
            return self.same(name, &existing, &sha256, now_us).await;
        }
        Ok(Put::Stored)
    }

    async fn same(&self, name: &str, existing: &str, new: &str, now_us: i64) -> Result<Put> {
        if existing != new {
            return Err(PackageStoreError::Conflict { name: name.to_string(), existing: existing.to_string() });
        }
        self.touch(name, now_us).await?;
        Ok(Put::Unchanged)
    }

    /// The package's row, if it has one.
    pub async fn get(&self, name: &str) -> Result<Option<Package>> {
        let row = sqlx::query("SELECT name, sha256, size_bytes FROM packages WHERE name = $1").bind(name).fetch_optional(&self.db.pool).await?;
        row.map(|r| Ok(Package { name: r.try_get(0)?, sha256: r.try_get(1)?, size_bytes: r.try_get(2)? })).transpose()
    }

    /// Marks the package used at `now_us` (which keeps it from garbage collection for a
    /// while); `None` when it is not stored. A row whose file is gone (a data dir restored
    /// without it) is dropped and reported missing.
    pub async fn touch(&self, name: &str, now_us: i64) -> Result<Option<Package>> {
        let done = sqlx::query("UPDATE packages SET used_at_us = $1 WHERE name = $2").bind(now_us).bind(name).execute(&self.db.pool).await?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        if !file_of(&self.data_dir, name).is_file() {
            tracing::warn!(package = name, "package file missing; forgetting the package");
            sqlx::query("DELETE FROM packages WHERE name = $1").bind(name).execute(&self.db.pool).await?;
            return Ok(None);
        }
        self.get(name).await
    }

    /// Removes packages last used before `now_us - unused_for` that no unfinished job names,
    /// then blobs no package uses.
    pub async fn collect(&self, now_us: i64, unused_for: Duration) -> Result<Collected> {
        let cutoff = now_us - i64::try_from(unused_for.as_micros()).unwrap_or(i64::MAX);
        let named = self.named_by_unfinished_jobs().await?;
        let stale: Vec<String> = sqlx::query("SELECT name FROM packages WHERE used_at_us < $1")
            .bind(cutoff)
            .fetch_all(&self.db.pool)
            .await?
            .iter()
            .map(|r| r.try_get(0))
            .collect::<Result<_, _>>()?;
        let mut done = Collected::default();
        for name in stale.iter().filter(|n| !named.contains(*n)) {
            // Only if still unused: a submission may have named it since the list was read.
            let deleted = sqlx::query("DELETE FROM packages WHERE name = $1 AND used_at_us < $2").bind(name).bind(cutoff).execute(&self.db.pool).await?;
            if deleted.rows_affected() > 0 {
                let _ = std::fs::remove_file(file_of(&self.data_dir, name));
                done.packages += 1;
            }
        }
        let live: std::collections::HashSet<String> = sqlx::query("SELECT DISTINCT sha256 FROM packages")
            .fetch_all(&self.db.pool)
            .await?
            .iter()
            .map(|r| r.try_get(0))
            .collect::<Result<_, _>>()?;
        let blobs = self.data_dir.join("packages").join("blobs");
        for entry in std::fs::read_dir(&blobs).into_iter().flatten().flatten() {
            let path = entry.path();
            let Some(sha) = path.file_stem().and_then(|s| s.to_str()) else { continue };
            let old = entry.metadata().ok().and_then(|m| m.modified().ok()).and_then(|t| t.elapsed().ok()).is_some_and(|age| age >= ORPHAN_AGE);
            if old && !live.contains(sha) {
                let bytes = entry.metadata().map(|m| m.len()).unwrap_or(0);
                if std::fs::remove_file(&path).is_ok() {
                    done.blobs += 1;
                    done.bytes += bytes;
                }
            }
        }
        Ok(done)
    }

    /// Package names in the specs of pending, admitted and running jobs.
    async fn named_by_unfinished_jobs(&self) -> Result<std::collections::HashSet<String>> {
        let rows = sqlx::query("SELECT spec_json FROM jobs WHERE state IN ('pending', 'admitted', 'running') AND spec_json LIKE '%_ray_pkg_%'")
            .fetch_all(&self.db.pool)
            .await?;
        let mut names = std::collections::HashSet::new();
        for row in rows {
            let spec: String = row.try_get(0)?;
            if let Ok(spec) = serde_json::from_str::<JobRequest>(&spec) {
                names.extend(app::request::packages(&spec.runtime_env).into_iter().map(str::to_string));
            }
        }
        Ok(names)
    }
}

/// Writes `bytes` to `blob` unless it is there (through a temporary file, so a blob is
/// never seen half written), then links `link` to it.
fn write_linked(blob: &Path, link: &Path, bytes: &[u8]) -> Result<()> {
    for dir in [blob.parent(), link.parent()].into_iter().flatten() {
        std::fs::create_dir_all(dir).map_err(|e| io("creating", dir, e))?;
    }
    if !blob.is_file() {
        let tmp = blob.with_extension(crate::clock::new_id("tmp"));
        std::fs::write(&tmp, bytes).map_err(|e| io("writing", &tmp, e))?;
        std::fs::rename(&tmp, blob).map_err(|e| io("renaming", &tmp, e))?;
    } else {
        // Fresh again, so a collection running now does not take it for an old orphan.
        let _ = std::fs::File::options().append(true).open(blob).and_then(|f| f.set_modified(std::time::SystemTime::now()));
    }
    match std::fs::remove_file(link) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("replacing", link, e)),
    }
    std::fs::hard_link(blob, link).map_err(|e| io("linking", link, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use app::jobs::{JobState, RuntimeEnv};

    async fn store() -> (PackageStore, crate::store::jobs::JobStore, PathBuf) {
        let dir = std::env::temp_dir().join(format!("berth-pkg-{}", crate::clock::new_id("t")));
        let db = Db::connect(&format!("sqlite://{}/berth.db", dir.display())).await.unwrap();
        (PackageStore::new(db.clone(), dir.join("data")), crate::store::jobs::JobStore::new(db), dir)
    }

    const HOUR: Duration = Duration::from_secs(3600);
    const H_US: i64 = 3_600_000_000;

    #[tokio::test]
    async fn same_bytes_are_stored_once_and_a_name_keeps_its_bytes() {
        let (s, _, dir) = store().await;
        assert_eq!(s.put("_ray_pkg_aa.zip", b"one".to_vec(), "ann", 1).await.unwrap(), Put::Stored);
        assert_eq!(s.put("_ray_pkg_aa.zip", b"one".to_vec(), "bob", 2).await.unwrap(), Put::Unchanged);
        assert_eq!(s.put("_ray_pkg_bb.zip", b"one".to_vec(), "bob", 3).await.unwrap(), Put::Stored);
        let err = s.put("_ray_pkg_aa.zip", b"two".to_vec(), "bob", 4).await.unwrap_err();
        assert!(matches!(err, PackageStoreError::Conflict { .. }), "{err}");
        let blobs = std::fs::read_dir(dir.join("data/packages/blobs")).unwrap().count();
        assert_eq!(blobs, 1, "one content, one blob");
        assert_eq!(std::fs::read(file_of(&dir.join("data"), "_ray_pkg_bb.zip")).unwrap(), b"one");
        assert_eq!(s.touch("_ray_pkg_nope.zip", 5).await.unwrap(), None);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn collection_keeps_recent_and_named_packages_and_removes_the_rest() {
        let (s, jobs, dir) = store().await;
        for name in ["_ray_pkg_01.zip", "_ray_pkg_02.zip", "_ray_pkg_03.zip"] {
            s.put(name, name.as_bytes().to_vec(), "ann", 0).await.unwrap();
        }
        s.touch("_ray_pkg_03.zip", 5 * H_US).await.unwrap();
        // A pending job names 02; a finished one names 01.
        let job = |id: &str, pkg: &str, state: JobState| {
            let spec = JobRequest { entrypoint: "true".into(), runtime_env: RuntimeEnv { working_dir: Some(format!("gcs://{pkg}")), ..Default::default() }, ..Default::default() };
            crate::store::jobs::JobRow { state, ..crate::store::jobs::JobRow::submitted(id.into(), id.into(), "ann".into(), spec, 0, 1, 1) }
        };
        jobs.insert(None, &[job("j-1", "_ray_pkg_01.zip", JobState::Succeeded), job("j-2", "_ray_pkg_02.zip", JobState::Pending)], &[]).await.unwrap();
        let done = s.collect(6 * H_US, 2 * HOUR).await.unwrap();
        assert_eq!(done.packages, 1, "{done:?}");
        assert!(s.get("_ray_pkg_01.zip").await.unwrap().is_none(), "unused for 6 h, named by no unfinished job");
        assert!(s.get("_ray_pkg_02.zip").await.unwrap().is_some(), "a pending job names it");
        assert!(s.get("_ray_pkg_03.zip").await.unwrap().is_some(), "used an hour ago");
        assert!(!file_of(&dir.join("data"), "_ray_pkg_01.zip").exists());
        // Its blob is an orphan now, removed once old enough.
        let blobs = dir.join("data/packages/blobs");
        assert_eq!(std::fs::read_dir(&blobs).unwrap().count(), 3, "a fresh orphan stays");
        for e in std::fs::read_dir(&blobs).unwrap().flatten() {
            let f = std::fs::File::options().append(true).open(e.path()).unwrap();
            f.set_modified(std::time::SystemTime::now() - 2 * ORPHAN_AGE).unwrap();
        }
        let done = s.collect(6 * H_US, 2 * HOUR).await.unwrap();
        assert_eq!((done.packages, done.blobs), (0, 1), "{done:?}");
        assert_eq!(std::fs::read_dir(&blobs).unwrap().count(), 2);
        let _ = std::fs::remove_dir_all(dir);
    }
}
