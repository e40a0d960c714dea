//! The versioned config store: immutable versions, one active, applied atomically.
//!
//! Every apply takes the lock on the single `config_head` row first (an `UPDATE` that bumps the
//! active version), so concurrent applies are serialized by the database itself on SQLite and
//! PostgreSQL alike: version numbers are dense, never reused, and exactly one is active.

use app::api::{ConfigVersion, VersionSummary};
use app::config::SchedulerConfig;
use chrono::{DateTime, Utc};
use sqlx::Row;

use crate::store::Db;

/// Store failures; "not found" and "conflict" are outcomes the API maps to 404 and 409.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("config version {0} does not exist")]
    NotFound(i64),
    #[error("the active version is {actual}, not the expected {expected}: someone applied meanwhile")]
    Conflict { expected: i64, actual: i64 },
    #[error("stored config of version {version} is unreadable: {source}")]
    Corrupt { version: i64, source: serde_json::Error },
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
}

/// What an apply needs besides the config.
#[derive(Debug, Clone, Default)]
pub struct ApplyMeta {
    pub creator_id: String,
    pub message: Option<String>,
    pub expected_active_version: Option<i64>,
    /// Set when this apply restores an older version (audited as a rollback).
    pub rollback_of: Option<i64>,
}

/// Outcome of a successful apply.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    pub version: i64,
    /// The config that was active before, if any (for "nothing changed" and diffs).
    pub previous: Option<SchedulerConfig>,
}

/// The config versions table.
#[derive(Debug, Clone)]
pub struct ConfigStore {
    db: Db,
}

impl ConfigStore {
    /// A store over a migrated database.
    pub fn new(db: Db) -> Self {
        ConfigStore { db }
    }

    /// Stores `config` as a new version and makes it active, atomically.
    pub async fn apply(&self, config: &SchedulerConfig, meta: &ApplyMeta) -> Result<Applied, StoreError> {
        let json = serde_json::to_string(config).expect("a config always serializes");
        let mut tx = self.db.pool.begin().await?;
        // The first statement writes, so SQLite takes its write lock now (waiting on the busy
        // timeout) and PostgreSQL locks the head row until commit.
        let version: i64 = sqlx::query("UPDATE config_head SET active_version = active_version + 1 WHERE id = 1 RETURNING active_version")
            .fetch_one(&mut *tx)
            .await?
            .try_get(0)?;
        let previous_version = version - 1;
        if let Some(expected) = meta.expected_active_version {
            if expected != previous_version {
                tx.rollback().await?;
                return Err(StoreError::Conflict { expected, actual: previous_version });
            }
        }
        let previous = match previous_version {
            0 => None,
            v => Some(load_config(&mut tx, v).await?),
        };
        sqlx::query("INSERT INTO config_versions (version, created_at_us, creator_id, message, config_json) VALUES ($1, $2, $3, $4, $5)")
            .bind(version)
            .bind(Utc::now().timestamp_micros())
            .bind(&meta.creator_id)
            .bind(meta.message.as_deref())
            .bind(json)
            .execute(&mut *tx)
            .await?;
        // The event log shows applies beside the admissions they change, in the same order.
        let message = match &meta.message {
            Some(m) => format!("{} applied version {version}: {m}", meta.creator_id),
            None => format!("{} applied version {version}", meta.creator_id),
        };
        sqlx::query("INSERT INTO events (at_us, kind, config_version, message) VALUES ($1, 'config_applied', $2, $3)")
            .bind(Utc::now().timestamp_micros())
            .bind(version)
            .bind(&message)
            .execute(&mut *tx)
            .await?;
        let action = if meta.rollback_of.is_some() { "config.rollback" } else { "config.apply" };
        let target = format!("version {version}");
        crate::store::auth::write_audit(&mut tx, &crate::store::auth::AuditRecord { actor: &meta.creator_id, action, target: &target, detail: message }).await?;
        if self.db.kind == crate::store::DbKind::Postgres {
            // The other replicas put it in force too (see `replicas::notify`).
            sqlx::query("SELECT pg_notify('berth_config', '')").execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(Applied { version, previous })
    }

    /// The active version number; 0 before the first apply.
    pub async fn active_version(&self) -> Result<i64, StoreError> {
        Ok(sqlx::query("SELECT active_version FROM config_head WHERE id = 1")
            .fetch_one(&self.db.pool)
            .await?
            .try_get(0)?)
    }

    /// Version `version`, or the active one when `None`.
    pub async fn get(&self, version: Option<i64>) -> Result<ConfigVersion, StoreError> {
        let active = self.active_version().await?;
        let version = version.unwrap_or(active);
        let row = sqlx::query("SELECT version, created_at_us, creator_id, message, config_json FROM config_versions WHERE version = $1")
            .bind(version)
            .fetch_optional(&self.db.pool)
            .await?
            .ok_or(StoreError::NotFound(version))?;
        let summary = summary_from_row(&row, active)?;
        let json: String = row.try_get(4)?;
        let config = serde_json::from_str(&json).map_err(|source| StoreError::Corrupt { version, source })?;
        Ok(ConfigVersion {
            version: summary.version,
            is_active: summary.is_active,
            created_at: summary.created_at,
            creator_id: summary.creator_id,
            message: summary.message,
            config,
            not_in_force: None,
        })
    }

    /// Up to `limit` summaries older than `before` (all when `None`), newest first, plus
    /// whether more remain.
    pub async fn list(&self, before: Option<i64>, limit: i64) -> Result<(Vec<VersionSummary>, bool), StoreError> {
        let active = self.active_version().await?;
        let rows = sqlx::query("SELECT version, created_at_us, creator_id, message FROM config_versions WHERE version < $1 ORDER BY version DESC LIMIT $2")
            .bind(before.unwrap_or(i64::MAX))
            .bind(limit + 1)
            .fetch_all(&self.db.pool)
            .await?;
        let more = rows.len() as i64 > limit;
        let summaries = rows
            .iter()
            .take(limit as usize)
            .map(|row| summary_from_row(row, active))
            .collect::<Result<_, _>>()?;
        Ok((summaries, more))
    }
}

async fn load_config(conn: &mut sqlx::AnyConnection, version: i64) -> Result<SchedulerConfig, StoreError> {
    let json: String = sqlx::query("SELECT config_json FROM config_versions WHERE version = $1")
        .bind(version)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or(StoreError::NotFound(version))?
        .try_get(0)?;
    serde_json::from_str(&json).map_err(|source| StoreError::Corrupt { version, source })
}

fn summary_from_row(row: &sqlx::any::AnyRow, active: i64) -> Result<VersionSummary, StoreError> {
    let version: i64 = row.try_get(0)?;
    let created_at_us: i64 = row.try_get(1)?;
    Ok(VersionSummary {
        version,
        is_active: version == active,
        created_at: DateTime::<Utc>::from_timestamp_micros(created_at_us).unwrap_or_default(),
        creator_id: row.try_get(2)?,
        message: row.try_get(3)?,
    })
}
