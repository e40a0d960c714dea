//! API tokens, dashboard sessions and the audit log in the database.
//!
//! Secrets are never stored or seen here: a token and a session are found by the SHA-256 of
//! their secret, which `services::auth` computes. Each change that is audited commits in
//! the same transaction as its audit entry.

use app::auth::{AuditEntry, AuditPage, Role, TokenInfo};
use chrono::{DateTime, Utc};
use sqlx::any::AnyRow;
use sqlx::Row;

use crate::clock::now_us;
use crate::store::Db;

/// One audit entry to write.
#[derive(Debug, Clone)]
pub struct AuditRecord<'a> {
    pub actor: &'a str,
    pub action: &'static str,
    pub target: &'a str,
    pub detail: String,
}

/// Writes `record` on `conn`, so it commits (or not) with the change it describes.
pub async fn write_audit(conn: &mut sqlx::AnyConnection, record: &AuditRecord<'_>) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO audit (at_us, actor, action, target, detail) VALUES ($1, $2, $3, $4, $5)")
        .bind(now_us())
        .bind(record.actor)
        .bind(record.action)
        .bind(record.target)
        .bind(&record.detail)
        .execute(conn)
        .await?;
    Ok(())
}

/// A token to store: its id, the hash of its secret, whom it stands for.
#[derive(Debug, Clone)]
pub struct NewTokenRow<'a> {
    pub id: &'a str,
    pub secret_sha256: &'a str,
    pub user: &'a str,
    pub role: Role,
    pub label: Option<&'a str>,
    pub created_by: &'a str,
    pub at_us: i64,
}

/// A live (not revoked) token, as a lookup by its secret finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenOwner {
    pub id: String,
    pub user: String,
    pub role: Role,
    pub last_used_at_us: Option<i64>,
}

fn time(us: Option<i64>) -> Option<DateTime<Utc>> {
    us.and_then(DateTime::from_timestamp_micros)
}

fn role(text: &str) -> Role {
    Role::parse(text).unwrap_or(Role::Viewer)
}

const TOKEN_COLUMNS: &str = "id, user_id, role, label, created_at_us, created_by, last_used_at_us, revoked_at_us, revoked_by";

/// `id, user_id, role, last_used_at_us`.
fn owner_from_row(row: &AnyRow) -> Result<TokenOwner, sqlx::Error> {
    Ok(TokenOwner { id: row.try_get(0)?, user: row.try_get(1)?, role: role(&row.try_get::<String, _>(2)?), last_used_at_us: row.try_get(3)? })
}

fn token_from_row(row: &AnyRow) -> Result<TokenInfo, sqlx::Error> {
    Ok(TokenInfo {
        id: row.try_get(0)?,
        user: row.try_get(1)?,
        role: role(&row.try_get::<String, _>(2)?),
        label: row.try_get(3)?,
        created_at: time(Some(row.try_get(4)?)).unwrap_or_default(),
        created_by: row.try_get(5)?,
        last_used_at: time(row.try_get(6)?),
        revoked_at: time(row.try_get(7)?),
        revoked_by: row.try_get(8)?,
    })
}

/// Tokens, sessions and the audit log.
#[derive(Debug, Clone)]
pub struct AuthStore {
    db: Db,
}

impl AuthStore {
    pub fn new(db: Db) -> Self {
        AuthStore { db }
    }

    /// How many tokens were ever made (revoked ones too).
    pub async fn token_count(&self) -> Result<i64, sqlx::Error> {
        sqlx::query("SELECT COUNT(*) FROM tokens").fetch_one(&self.db.pool).await?.try_get(0)
    }

    async fn insert_token(conn: &mut sqlx::AnyConnection, t: &NewTokenRow<'_>) -> Result<TokenInfo, sqlx::Error> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO tokens (id, secret_sha256, user_id, role, label, created_at_us, created_by) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {TOKEN_COLUMNS}"
        )))
        .bind(t.id)
        .bind(t.secret_sha256)
        .bind(t.user)
        .bind(t.role.as_str())
        .bind(t.label)
        .bind(t.at_us)
        .bind(t.created_by)
        .fetch_one(conn)
        .await?;
        token_from_row(&row)
    }

    /// Stores a token without an audit entry (the first admin token, made by the server).
    pub async fn insert(&self, t: &NewTokenRow<'_>) -> Result<TokenInfo, sqlx::Error> {
        let mut conn = self.db.pool.acquire().await?;
        Self::insert_token(&mut conn, t).await
    }

    /// Stores a token and its audit entry, together.
    pub async fn create(&self, t: &NewTokenRow<'_>, detail: String) -> Result<TokenInfo, sqlx::Error> {
        let mut tx = self.db.pool.begin().await?;
        let token = Self::insert_token(&mut tx, t).await?;
        write_audit(&mut tx, &AuditRecord { actor: t.created_by, action: "token.create", target: &token.id, detail }).await?;
        tx.commit().await?;
        Ok(token)
    }

    /// The live token whose secret hashes to `secret_sha256`.
    pub async fn token_owner(&self, secret_sha256: &str) -> Result<Option<TokenOwner>, sqlx::Error> {
        let row = sqlx::query("SELECT id, user_id, role, last_used_at_us FROM tokens WHERE secret_sha256 = $1 AND revoked_at_us IS NULL")
            .bind(secret_sha256)
            .fetch_optional(&self.db.pool)
            .await?;
        row.as_ref().map(owner_from_row).transpose()
    }

    /// Records that token `id` was used at `at_us`.
    pub async fn touch(&self, id: &str, at_us: i64) -> Result<(), sqlx::Error> {
        sqlx::query("UPDATE tokens SET last_used_at_us = $1 WHERE id = $2").bind(at_us).bind(id).execute(&self.db.pool).await?;
        Ok(())
    }

    /// The token behind the session whose cookie hashes to `id_sha256`, when the session has
    /// not expired at `now_us` and the token is not revoked.
    pub async fn session_owner(&self, id_sha256: &str, now_us: i64) -> Result<Option<TokenOwner>, sqlx::Error> {
        let row = sqlx::query(
            "SELECT t.id, t.user_id, t.role, t.last_used_at_us FROM sessions s JOIN tokens t ON t.id = s.token_id \
             WHERE s.id_sha256 = $1 AND s.expires_at_us > $2 AND t.revoked_at_us IS NULL",
        )
        .bind(id_sha256)
        .bind(now_us)
        .fetch_optional(&self.db.pool)
        .await?;
        row.as_ref().map(owner_from_row).transpose()
    }

    /// Opens a session of token `token_id` until `expires_at_us`, with its audit entry;
    /// sweeps the sessions that expired by `now_us`.
    pub async fn open_session(&self, id_sha256: &str, token_id: &str, now_us: i64, expires_at_us: i64, audit: &AuditRecord<'_>) -> Result<(), sqlx::Error> {
        let mut tx = self.db.pool.begin().await?;
        sqlx::query("DELETE FROM sessions WHERE expires_at_us <= $1").bind(now_us).execute(&mut *tx).await?;
        sqlx::query("INSERT INTO sessions (id_sha256, token_id, created_at_us, expires_at_us) VALUES ($1, $2, $3, $4)")
            .bind(id_sha256)
            .bind(token_id)
            .bind(now_us)
            .bind(expires_at_us)
            .execute(&mut *tx)
            .await?;
        write_audit(&mut tx, audit).await?;
        tx.commit().await
    }

    /// Ends the session whose cookie hashes to `id_sha256` (nothing when there is none).
    pub async fn close_session(&self, id_sha256: &str) -> Result<(), sqlx::Error> {
        sqlx::query("DELETE FROM sessions WHERE id_sha256 = $1").bind(id_sha256).execute(&self.db.pool).await?;
        Ok(())
    }

    /// Every token, newest first.
    pub async fn tokens(&self) -> Result<Vec<TokenInfo>, sqlx::Error> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {TOKEN_COLUMNS} FROM tokens ORDER BY created_at_us DESC, id")))
            .fetch_all(&self.db.pool)
            .await?;
        rows.iter().map(token_from_row).collect()
    }

    /// Revokes token `id` by `by` at `at_us` (kept as first revoked when it already was), ends
    /// its sessions, and writes the audit entry `detail` makes of it; `None` when there is no
    /// such token.
    pub async fn revoke(&self, id: &str, by: &str, at_us: i64, detail: impl FnOnce(&TokenInfo) -> String) -> Result<Option<TokenInfo>, sqlx::Error> {
        let mut tx = self.db.pool.begin().await?;
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE tokens SET revoked_at_us = COALESCE(revoked_at_us, $1), revoked_by = COALESCE(revoked_by, $2) WHERE id = $3 RETURNING {TOKEN_COLUMNS}"
        )))
        .bind(at_us)
        .bind(by)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let token = token_from_row(&row)?;
        sqlx::query("DELETE FROM sessions WHERE token_id = $1").bind(id).execute(&mut *tx).await?;
        write_audit(&mut tx, &AuditRecord { actor: by, action: "token.revoke", target: id, detail: detail(&token) }).await?;
        tx.commit().await?;
        Ok(Some(token))
    }

    /// Writes `record` on its own (for changes made elsewhere, e.g. by the admission loop).
    pub async fn record(&self, record: &AuditRecord<'_>) -> Result<(), sqlx::Error> {
        let mut conn = self.db.pool.acquire().await?;
        write_audit(&mut conn, record).await
    }

    /// Audit entries older than `cursor` (a `seq`), newest first, optionally of one action
    /// or actor.
    pub async fn audit(&self, action: Option<&str>, actor: Option<&str>, cursor: Option<i64>, limit: i64) -> Result<AuditPage, sqlx::Error> {
        let mut sql = String::from("SELECT seq, at_us, actor, action, target, detail FROM audit WHERE seq < $1");
        let mut n = 1;
        for (column, value) in [("action", action), ("actor", actor)] {
            if value.is_some() {
                n += 1;
                sql.push_str(&format!(" AND {column} = ${n}"));
            }
        }
        sql.push_str(&format!(" ORDER BY seq DESC LIMIT ${}", n + 1));
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(cursor.unwrap_or(i64::MAX));
        for value in [action, actor].into_iter().flatten() {
            query = query.bind(value);
        }
        let rows = query.bind(limit + 1).fetch_all(&self.db.pool).await?;
        let more = rows.len() as i64 > limit;
        let mut entries = Vec::with_capacity(rows.len());
        for row in rows.iter().take(limit as usize) {
            entries.push(AuditEntry {
                seq: row.try_get(0)?,
                at: time(Some(row.try_get(1)?)).unwrap_or_default(),
                actor: row.try_get(2)?,
                action: row.try_get(3)?,
                target: row.try_get(4)?,
                detail: row.try_get(5)?,
            });
        }
        let next_cursor = more.then(|| entries.last().map(|e| e.seq.to_string())).flatten();
        Ok(AuditPage { entries, next_cursor })
    }
}
