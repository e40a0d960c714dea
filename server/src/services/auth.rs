//! Who is calling and what they may do: API tokens, dashboard sessions, roles and the audit
//! log.
//!
//! A token's secret is 32 random bytes shown once; only its SHA-256 is stored, so a leaked
//! database does not leak credentials (the secret has full entropy, so a slow hash would add
//! nothing). A session is opened by signing in with a token and dies with it: revoking a
//! token ends its sessions at the next request. Roles are checked by the services
//! ([`Caller::require`]), so the REST API, the dashboard and the CLI obey the same rules.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use app::auth::{check_user, AuditEntry, AuditPage, CreatedToken, NewToken, Role, TokenInfo, Via, Whoami};
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use sqlx::Row;

use crate::store::Db;
use crate::clock::now_us;

/// How long a dashboard session lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// The session cookie's name.
pub const SESSION_COOKIE: &str = "berth_session";
/// Failed sign-ins one address may make per [`SIGNIN_WINDOW`].
pub const SIGNIN_FAILURES: u32 = 10;
pub const SIGNIN_WINDOW: Duration = Duration::from_secs(300);

/// The authenticated caller of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub user: String,
    pub role: Role,
    pub via: Via,
    /// The token it proved itself with (also for sessions).
    pub token_id: Option<String>,
}

/// A refusal: the caller is known but may not do this (403).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Denied(pub String);

impl Caller {
    /// Everyone, in anonymous local mode: an admin named `anonymous`.
    pub fn anonymous() -> Caller {
        Caller { user: "anonymous".into(), role: Role::Admin, via: Via::Anonymous, token_id: None }
    }

    /// The caller as the API shows it.
    pub fn whoami(&self) -> Whoami {
        Whoami { user: self.user.clone(), role: self.role, via: self.via }
    }

    /// Ok when the caller's role includes `needed`; else why not, naming `what` it tried.
    pub fn require(&self, needed: Role, what: &str) -> Result<(), Denied> {
        if self.role.allows(needed) {
            return Ok(());
        }
        Err(Denied(format!("{what} needs the {needed} role; {} is a {}", self.user, self.role)))
    }

    /// Ok when the caller may cancel or re-prioritise a job of `submitter`.
    pub fn require_owner(&self, submitter: &str, what: &str) -> Result<(), Denied> {
        if self.whoami().may_act_on(submitter) {
            return Ok(());
        }
        if !self.role.allows(Role::Submitter) {
            return self.require(Role::Submitter, what);
        }
        Err(Denied(format!("{what}: the job belongs to {submitter}; only its submitter or an admin may do that")))
    }
}

/// Failures of token and audit operations.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error(transparent)]
    Denied(#[from] Denied),
    /// Bad input: `field: problem`.
    #[error("{0}")]
    Invalid(String),
    #[error("token `{0}` does not exist")]
    NotFound(String),
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
}

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

/// Tokens, sessions and the audit log over the database.
#[derive(Debug)]
pub struct Auth {
    db: Db,
    /// Anonymous local mode: callers without credentials act as [`Caller::anonymous`].
    pub anonymous: bool,
    /// Failed sign-ins per address: the window's start and the count.
    failures: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

/// The prefix of new secrets. The `anyscale` SDK refuses, before sending anything, a token
/// that does not start with `sss_` (or with `a` and hold a `_`), so Berth's tokens start
/// with `sss_` and work with it unchanged. Older `berth_…` tokens stay valid: a token is
/// looked up by the hash of its whole secret, whatever its form.
pub const SECRET_PREFIX: &str = "sss_berth_";

/// A new secret: [`SECRET_PREFIX`] and 64 hex digits (32 random bytes).
fn new_secret() -> String {
    format!("{SECRET_PREFIX}{}", random_hex(32))
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).expect("the operating system's random source works");
    hex(&buf)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

fn time(us: Option<i64>) -> Option<DateTime<Utc>> {
    us.and_then(DateTime::from_timestamp_micros)
}

const TOKEN_COLUMNS: &str = "id, user_id, role, label, created_at_us, created_by, last_used_at_us, revoked_at_us, revoked_by";

fn token_from_row(row: &sqlx::any::AnyRow) -> Result<TokenInfo, sqlx::Error> {
    let role: String = row.try_get(2)?;
    Ok(TokenInfo {
        id: row.try_get(0)?,
        user: row.try_get(1)?,
        role: Role::parse(&role).unwrap_or(Role::Viewer),
        label: row.try_get(3)?,
        created_at: time(Some(row.try_get(4)?)).unwrap_or_default(),
        created_by: row.try_get(5)?,
        last_used_at: time(row.try_get(6)?),
        revoked_at: time(row.try_get(7)?),
        revoked_by: row.try_get(8)?,
    })
}

impl Auth {
    pub fn new(db: Db, anonymous: bool) -> Self {
        Auth { db, anonymous, failures: Mutex::new(HashMap::new()) }
    }

    /// On a database with no token yet, creates the first admin token (user `admin`): the
    /// given secret, or a new one that is returned so the server can print it once.
    pub async fn bootstrap(&self, given: Option<&str>) -> Result<Option<String>, AuthError> {
        let count: i64 = sqlx::query("SELECT COUNT(*) FROM tokens").fetch_one(&self.db.pool).await?.try_get(0)?;
        if count > 0 {
            return Ok(None);
        }
        if let Some(secret) = given {
            if secret.len() < 16 {
                return Err(AuthError::Invalid("BERTH_ADMIN_TOKEN: must be at least 16 characters".into()));
            }
        }
        let secret = given.map(str::to_string).unwrap_or_else(new_secret);
        let mut conn = self.db.pool.acquire().await?;
        self.insert_token(&mut conn, &secret, "admin", Role::Admin, Some("bootstrap"), "berth").await?;
        Ok(given.is_none().then_some(secret))
    }

    async fn insert_token(
        &self,
        conn: &mut sqlx::AnyConnection,
        secret: &str,
        user: &str,
        role: Role,
        label: Option<&str>,
        by: &str,
    ) -> Result<TokenInfo, sqlx::Error> {
        let id = format!("t-{}", random_hex(6));
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO tokens (id, secret_sha256, user_id, role, label, created_at_us, created_by) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {TOKEN_COLUMNS}"
        )))
        .bind(&id)
        .bind(sha256(secret))
        .bind(user)
        .bind(role.as_str())
        .bind(label)
        .bind(now_us())
        .bind(by)
        .fetch_one(conn)
        .await?;
        token_from_row(&row)
    }

    /// The caller a bearer token stands for; `None` when it is unknown or revoked.
    pub async fn by_token(&self, secret: &str) -> Result<Option<Caller>, sqlx::Error> {
        let row = sqlx::query("SELECT id, user_id, role, last_used_at_us FROM tokens WHERE secret_sha256 = $1 AND revoked_at_us IS NULL")
            .bind(sha256(secret))
            .fetch_optional(&self.db.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let id: String = row.try_get(0)?;
        // Last use is kept to the minute, so a busy client does not write on every call.
        let last: Option<i64> = row.try_get(3)?;
        let now = now_us();
        if last.is_none_or(|t| now - t > 60_000_000) {
            sqlx::query("UPDATE tokens SET last_used_at_us = $1 WHERE id = $2").bind(now).bind(&id).execute(&self.db.pool).await?;
        }
        let role: String = row.try_get(2)?;
        Ok(Some(Caller { user: row.try_get(1)?, role: Role::parse(&role).unwrap_or(Role::Viewer), via: Via::Token, token_id: Some(id) }))
    }

    /// The caller a session cookie stands for; `None` when it expired or its token was revoked.
    pub async fn by_session(&self, cookie: &str) -> Result<Option<Caller>, sqlx::Error> {
        let row = sqlx::query(
            "SELECT t.id, t.user_id, t.role FROM sessions s JOIN tokens t ON t.id = s.token_id \
             WHERE s.id_sha256 = $1 AND s.expires_at_us > $2 AND t.revoked_at_us IS NULL",
        )
        .bind(sha256(cookie))
        .bind(now_us())
        .fetch_optional(&self.db.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let role: String = row.try_get(2)?;
        Ok(Some(Caller {
            user: row.try_get(1)?,
            role: Role::parse(&role).unwrap_or(Role::Viewer),
            via: Via::Session,
            token_id: Some(row.try_get(0)?),
        }))
    }

    /// Whether `from` has used up its failed sign-ins; the time left until it may retry.
    pub fn signin_blocked(&self, from: Option<IpAddr>) -> Option<Duration> {
        let from = from?;
        let failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let (start, count) = failures.get(&from)?;
        let elapsed = start.elapsed();
        (*count >= SIGNIN_FAILURES && elapsed < SIGNIN_WINDOW).then(|| SIGNIN_WINDOW - elapsed)
    }

    fn signin_failed(&self, from: Option<IpAddr>) {
        let Some(from) = from else { return };
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        failures.retain(|_, (start, _)| start.elapsed() < SIGNIN_WINDOW);
        let entry = failures.entry(from).or_insert((Instant::now(), 0));
        entry.1 += 1;
    }

    /// Opens a session for the holder of `secret`: the cookie value and the caller, or
    /// `None` when the token is not valid (counted against `from`).
    pub async fn sign_in(&self, secret: &str, from: Option<IpAddr>) -> Result<Option<(String, Caller)>, sqlx::Error> {
        let Some(caller) = self.by_token(secret.trim()).await? else {
            self.signin_failed(from);
            return Ok(None);
        };
        let cookie = random_hex(32);
        let now = now_us();
        let mut tx = self.db.pool.begin().await?;
        // Expired sessions are swept as new ones open.
        sqlx::query("DELETE FROM sessions WHERE expires_at_us <= $1").bind(now).execute(&mut *tx).await?;
        sqlx::query("INSERT INTO sessions (id_sha256, token_id, created_at_us, expires_at_us) VALUES ($1, $2, $3, $4)")
            .bind(sha256(&cookie))
            .bind(caller.token_id.as_deref())
            .bind(now)
            .bind(now + SESSION_TTL.as_micros() as i64)
            .execute(&mut *tx)
            .await?;
        let detail = format!("signed in to the dashboard as {} ({})", caller.user, caller.role);
        let target = caller.token_id.clone().unwrap_or_default();
        write_audit(&mut tx, &AuditRecord { actor: &caller.user, action: "session.signin", target: &target, detail }).await?;
        tx.commit().await?;
        Ok(Some((cookie, caller)))
    }

    /// Ends the session of `cookie` (nothing when there is none).
    pub async fn sign_out(&self, cookie: &str) -> Result<(), sqlx::Error> {
        sqlx::query("DELETE FROM sessions WHERE id_sha256 = $1").bind(sha256(cookie)).execute(&self.db.pool).await?;
        Ok(())
    }

    /// Creates a token for `new.user` with `new.role`; the secret is in the answer only.
    pub async fn create_token(&self, caller: &Caller, new: &NewToken) -> Result<CreatedToken, AuthError> {
        caller.require(Role::Admin, "creating tokens")?;
        check_user(&new.user).map_err(AuthError::Invalid)?;
        let label = new.label.as_deref().map(str::trim).filter(|l| !l.is_empty());
        if let Some(l) = label {
            if l.chars().count() > 100 || l.chars().any(char::is_control) {
                return Err(AuthError::Invalid("label: must be at most 100 printable characters".into()));
            }
        }
        let secret = new_secret();
        let mut tx = self.db.pool.begin().await?;
        let token = self.insert_token(&mut tx, &secret, &new.user, new.role, label, &caller.user).await?;
        let detail = format!("created a token for {} with the {} role{}", new.user, new.role, label.map(|l| format!(" ({l})")).unwrap_or_default());
        write_audit(&mut tx, &AuditRecord { actor: &caller.user, action: "token.create", target: &token.id, detail }).await?;
        tx.commit().await?;
        Ok(CreatedToken { token, secret })
    }

    /// Every token, newest first (revoked ones too, marked).
    pub async fn tokens(&self, caller: &Caller) -> Result<Vec<TokenInfo>, AuthError> {
        caller.require(Role::Admin, "listing tokens")?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {TOKEN_COLUMNS} FROM tokens ORDER BY created_at_us DESC, id")))
            .fetch_all(&self.db.pool)
            .await?;
        Ok(rows.iter().map(token_from_row).collect::<Result<_, _>>()?)
    }

    /// Revokes token `id` at once: its next request is refused and its sessions end.
    pub async fn revoke(&self, caller: &Caller, id: &str) -> Result<TokenInfo, AuthError> {
        caller.require(Role::Admin, "revoking tokens")?;
        if caller.token_id.as_deref() == Some(id) {
            return Err(AuthError::Invalid(format!(
                "token {id} is the one this request is signed in with; revoke it with another admin token so nobody locks themselves out"
            )));
        }
        let mut tx = self.db.pool.begin().await?;
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE tokens SET revoked_at_us = COALESCE(revoked_at_us, $1), revoked_by = COALESCE(revoked_by, $2) WHERE id = $3 RETURNING {TOKEN_COLUMNS}"
        )))
        .bind(now_us())
        .bind(&caller.user)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| AuthError::NotFound(id.to_string()))?;
        let token = token_from_row(&row)?;
        sqlx::query("DELETE FROM sessions WHERE token_id = $1").bind(id).execute(&mut *tx).await?;
        let detail = format!("revoked the token of {} ({} role)", token.user, token.role);
        write_audit(&mut tx, &AuditRecord { actor: &caller.user, action: "token.revoke", target: id, detail }).await?;
        tx.commit().await?;
        Ok(token)
    }

    /// Records `record` on its own (for changes made elsewhere, e.g. by the admission loop).
    pub async fn record(&self, record: AuditRecord<'_>) {
        let written = async {
            let mut conn = self.db.pool.acquire().await?;
            write_audit(&mut conn, &record).await
        };
        if let Err(e) = written.await {
            tracing::error!(error = %e, action = record.action, target = record.target, "cannot write the audit log");
        }
    }

    /// Audit entries older than `cursor`, newest first, optionally of one action or actor.
    pub async fn audit(
        &self,
        caller: &Caller,
        action: Option<&str>,
        actor: Option<&str>,
        cursor: Option<i64>,
        limit: i64,
    ) -> Result<AuditPage, AuthError> {
        caller.require(Role::Admin, "reading the audit log")?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_random_and_hashes_stable() {
        let (a, b) = (new_secret(), new_secret());
        assert_ne!(a, b);
        assert_eq!(a.len(), SECRET_PREFIX.len() + 64);
        // What the anyscale SDK checks before it sends a token (`credentials_check_sanity`).
        assert!(a.starts_with("sss_"));
        assert_eq!(sha256("x"), sha256("x"));
        assert_eq!(sha256("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn refusals_say_who_and_what() {
        let viewer = Caller { user: "vic".into(), role: Role::Viewer, via: Via::Token, token_id: None };
        let err = viewer.require(Role::Editor, "applying a config").unwrap_err();
        assert_eq!(err.0, "applying a config needs the editor role; vic is a viewer");
        let sub = Caller { role: Role::Submitter, ..viewer };
        assert!(sub.require_owner("vic", "cancel").is_ok());
        assert!(sub.require_owner("ann", "cancel").unwrap_err().0.contains("belongs to ann"));
    }
}
