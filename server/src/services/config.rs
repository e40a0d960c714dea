//! The service layer: the one place that answers the REST API and the dashboard's server
//! functions. It validates before it stores, so nothing invalid is ever written.

use app::api::{ApplyResponse, ConfigVersion, VersionPage};
use app::config::diff::{diff_labeled, ConfigDiff};
use app::config::validate::validate;
use app::config::{Report, SchedulerConfig};

use app::auth::Role;

use crate::services::auth::{Caller, Denied};
use crate::store::config::{ApplyMeta, ConfigStore, StoreError};

/// Largest page of versions a caller may ask for.
pub const MAX_PAGE: i64 = 1000;

/// What the service refuses or fails at; mapped once to HTTP in `http::error`.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("the config has {} error(s)", .0.errors().count())]
    Invalid(Report),
    #[error("{0}")]
    BadRequest(String),
    #[error(transparent)]
    Forbidden(#[from] Denied),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Config versions: validate, apply, read, diff, roll back.
#[derive(Debug, Clone)]
pub struct ConfigService {
    store: ConfigStore,
    /// The active version after each apply made through this service (wakes the loop).
    applied: std::sync::Arc<tokio::sync::watch::Sender<i64>>,
}

impl ConfigService {
    /// A service over `store`.
    pub fn new(store: ConfigStore) -> Self {
        ConfigService { store, applied: std::sync::Arc::new(tokio::sync::watch::channel(0).0) }
    }

    /// The version of the last apply made through this service (0 before the first).
    pub fn applied_version(&self) -> i64 {
        *self.applied.borrow()
    }

    /// Notified with the new active version after every apply or rollback.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<i64> {
        self.applied.subscribe()
    }

    /// Creates version 1 (flavor `local`, queue `default`, one catch-all rule) on a fresh
    /// database; a no-op otherwise, also when another replica races us to it.
    pub async fn ensure_initial(&self) -> Result<(), ServiceError> {
        if self.store.active_version().await? > 0 {
            return Ok(());
        }
        let meta = ApplyMeta {
            creator_id: "berth".into(),
            message: Some("initial config".into()),
            expected_active_version: Some(0),
            rollback_of: None,
        };
        match self.store.apply(&SchedulerConfig::initial(), &meta).await {
            Ok(_) | Err(StoreError::Conflict { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Validates and stores `config` as the new active version, made by `caller` (whatever
    /// `meta.creator_id` says: the author is who is signed in).
    pub async fn apply(&self, caller: &Caller, config: &SchedulerConfig, meta: &ApplyMeta) -> Result<ApplyResponse, ServiceError> {
        caller.require(Role::Editor, "applying a config")?;
        let meta = ApplyMeta { creator_id: caller.user.clone(), ..meta.clone() };
        self.store_version(config, &meta).await
    }

    async fn store_version(&self, config: &SchedulerConfig, meta: &ApplyMeta) -> Result<ApplyResponse, ServiceError> {
        // PostgreSQL cannot store a NUL character (the validator refuses one in the config).
        if meta.message.as_deref().is_some_and(|t| t.contains('\0')) {
            return Err(ServiceError::BadRequest("message: must not contain a NUL character".into()));
        }
        let report = validate(config);
        if report.has_errors() {
            return Err(ServiceError::Invalid(report));
        }
        let applied = self.store.apply(config, meta).await?;
        self.applied.send_replace(applied.version);
        Ok(ApplyResponse {
            version: applied.version,
            changed: applied.previous.as_ref() != Some(config),
            warnings: report.warnings().cloned().collect(),
        })
    }

    /// Version `version`, or the active one.
    pub async fn get(&self, version: Option<i64>) -> Result<ConfigVersion, ServiceError> {
        Ok(self.store.get(version).await?)
    }

    /// A page of version summaries, newest first. `cursor` is a `next_cursor` from an
    /// earlier page.
    pub async fn list(&self, max_items: Option<i64>, cursor: Option<&str>) -> Result<VersionPage, ServiceError> {
        let limit = max_items.unwrap_or(10);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(ServiceError::BadRequest(format!("max_items: must be between 1 and {MAX_PAGE}, got {limit}")));
        }
        let before = cursor.map(parse_cursor).transpose()?;
        let (versions, more) = self.store.list(before, limit).await?;
        let next_cursor = more.then(|| versions.last().map(|v| v.version.to_string())).flatten();
        Ok(VersionPage { versions, next_cursor })
    }

    /// Applies a copy of version `version` as a new version whose message says so.
    pub async fn rollback(&self, caller: &Caller, version: i64, meta: &ApplyMeta) -> Result<ApplyResponse, ServiceError> {
        caller.require(Role::Editor, "rolling back the config")?;
        let target = self.store.get(Some(version)).await?;
        let message = match &meta.message {
            Some(why) => format!("rollback to version {version}: {why}"),
            None => format!("rollback to version {version}"),
        };
        let meta = ApplyMeta { message: Some(message), creator_id: caller.user.clone(), rollback_of: Some(version), ..meta.clone() };
        self.store_version(&target.config, &meta).await
    }

    /// Structural and text diff from version `from` to version `to`. Defaults: `to` is the
    /// active version and `from` its predecessor.
    pub async fn diff(&self, from: Option<i64>, to: Option<i64>) -> Result<ConfigDiff, ServiceError> {
        let to = self.store.get(to).await?;
        let from_version = from.unwrap_or(to.version - 1);
        let from = match from_version {
            0 => None,
            v => Some(self.store.get(Some(v)).await?),
        };
        let empty = SchedulerConfig::default();
        let old = from.as_ref().map_or(&empty, |v| &v.config);
        Ok(diff_labeled(old, &to.config, &format!("version {from_version}"), &format!("version {}", to.version)))
    }
}

fn parse_cursor(cursor: &str) -> Result<i64, ServiceError> {
    cursor
        .parse::<i64>()
        .ok()
        .filter(|v| *v > 0)
        .ok_or_else(|| ServiceError::BadRequest(format!("cursor: `{cursor}` is not a cursor returned by this API")))
}
