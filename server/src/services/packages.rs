//! Packages: the working directories and `py_modules` Ray's clients upload before they submit
//! (`PUT /api/packages/gcs/_ray_pkg_<hash>.zip`). An upload is checked (size, a zip whose
//! every entry unpacks safely into a directory) and stored by content; a submission naming a
//! package is refused unless it is stored; unused packages are collected.

use std::sync::Arc;
use std::time::Duration;

use app::auth::Role;
use app::jobs::JobRequest;

use crate::clock::now_us;
use crate::services::auth::{Caller, Denied};
use crate::store::packages::{PackageStore, PackageStoreError, Put};

/// Limits of the package store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackageSettings {
    /// Largest package accepted, in bytes.
    pub max_bytes: u64,
    /// A package unused this long, and named by no unfinished job, is removed.
    pub keep_unused: Duration,
}

impl Default for PackageSettings {
    fn default() -> Self {
        PackageSettings { max_bytes: 100 * 1024 * 1024, keep_unused: Duration::from_secs(24 * 3600) }
    }
}

/// How often unused packages are looked for.
const COLLECT_EVERY: Duration = Duration::from_secs(600);

/// What an upload is refused for; mapped to HTTP in `http::error`.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    /// Bad name or not a usable zip archive.
    #[error("{0}")]
    Invalid(String),
    #[error("package is {size} bytes, more than the limit of {limit} bytes (berth serve --package-max-mb)")]
    TooLarge { size: u64, limit: u64 },
    #[error(transparent)]
    Forbidden(#[from] Denied),
    /// The name is taken by other bytes.
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Store(String),
}

impl From<PackageStoreError> for PackageError {
    fn from(e: PackageStoreError) -> Self {
        match e {
            e @ PackageStoreError::Conflict { .. } => PackageError::Conflict(e.to_string()),
            other => PackageError::Store(other.to_string()),
        }
    }
}

/// The package service.
#[derive(Debug, Clone)]
pub struct Packages {
    store: PackageStore,
    settings: PackageSettings,
}

/// The package name of `protocol` and `name` from a package path, when it is one Berth
/// stores (`gcs`, `_ray_pkg_<hex>.zip`).
fn checked_name<'a>(protocol: &str, name: &'a str) -> Result<&'a str, PackageError> {
    if protocol != "gcs" {
        return Err(PackageError::Invalid(format!("protocol `{protocol}`: Berth stores `gcs` packages only (remote URIs such as s3:// are passed to Ray as they are)")));
    }
    let uri = format!("gcs://{name}");
    app::request::package_name(&uri)
        .map(|_| name)
        .ok_or_else(|| PackageError::Invalid(format!("package name `{name}`: expected _ray_pkg_<hex>.zip, as Ray's client names packages")))
}

impl Packages {
    pub fn new(store: PackageStore, settings: PackageSettings) -> Packages {
        Packages { store, settings }
    }

    pub fn settings(&self) -> PackageSettings {
        self.settings
    }

    /// Checks and stores an upload of `protocol/name` (as Ray's `PUT /api/packages/…`).
    pub async fn upload(&self, caller: &Caller, protocol: &str, name: &str, bytes: Vec<u8>) -> Result<Put, PackageError> {
        caller.require(Role::Submitter, "uploading packages")?;
        let name = checked_name(protocol, name)?;
        let size = bytes.len() as u64;
        if size > self.settings.max_bytes {
            return Err(PackageError::TooLarge { size, limit: self.settings.max_bytes });
        }
        // Inflating every entry takes a while for a big archive: not on the runtime's threads.
        let bytes = tokio::task::spawn_blocking(move || crate::zipfile::verify(&bytes).map(|_| bytes))
            .await
            .map_err(|e| PackageError::Store(e.to_string()))?
            .map_err(|e| PackageError::Invalid(format!("package {name} is not a usable zip archive: {e}")))?;
        let put = self.store.put(name, bytes, &caller.user, now_us()).await?;
        tracing::info!(package = name, size, by = %caller.user, stored = (put == Put::Stored), "package uploaded");
        Ok(put)
    }

    /// Whether `protocol/name` is stored (as Ray's `GET /api/packages/…`); asking keeps it a
    /// while longer, as in Ray, where the check pins the package until the submission.
    pub async fn exists(&self, protocol: &str, name: &str) -> Result<bool, PackageError> {
        let name = checked_name(protocol, name)?;
        Ok(self.store.touch(name, now_us()).await?.is_some())
    }

    /// Ok when every package `req` names is stored (and marks them used), else
    /// `field: problem` for the first missing one.
    pub async fn require(&self, req: &JobRequest) -> Result<(), PackageError> {
        let names = app::request::packages(&req.runtime_env);
        for name in names {
            if self.store.touch(name, now_us()).await?.is_none() {
                let field = match req.runtime_env.working_dir.as_deref() {
                    Some(dir) if dir.ends_with(name) => "runtime_env.working_dir",
                    _ => "runtime_env.py_modules",
                };
                return Err(PackageError::Invalid(format!(
                    "{field}: package gcs://{name} is not stored in Berth (never uploaded, or removed after {} h unused); \
                     `ray job submit` uploads it with PUT /api/packages/gcs/{name}",
                    self.settings.keep_unused.as_secs() / 3600
                )));
            }
        }
        Ok(())
    }

    /// Removes unused packages every few minutes, for as long as the server runs.
    pub fn collect_in_background(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(COLLECT_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                let Some(me) = me.upgrade() else { return };
                match me.store.collect(now_us(), me.settings.keep_unused).await {
                    Ok(done) if done.packages + done.blobs > 0 => {
                        tracing::info!(packages = done.packages, blobs = done.blobs, bytes = done.bytes, "unused packages removed");
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "package garbage collection failed"),
                }
            }
        });
    }
}
