//! Who is calling and what they may do: API tokens, dashboard sessions, roles and the audit
//! log. The SQL is in `store::auth`.
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

use app::auth::{check_user, AuditPage, CreatedToken, NewToken, Role, TokenInfo, Via, Whoami};
use sha2::{Digest, Sha256};

use crate::clock::now_us;
use crate::store::auth::{AuditRecord, AuthStore, NewTokenRow};
use crate::store::Db;

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

/// Tokens, sessions and the audit log over the database.
#[derive(Debug)]
pub struct Auth {
    store: AuthStore,
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

fn new_token_id() -> String {
    format!("t-{}", random_hex(6))
}

impl Auth {
    pub fn new(db: Db, anonymous: bool) -> Self {
        Auth { store: AuthStore::new(db), anonymous, failures: Mutex::new(HashMap::new()) }
    }

    /// On a database with no token yet, creates the first admin token (user `admin`): the
    /// given secret, or a new one that is returned so the server can print it once.
    pub async fn bootstrap(&self, given: Option<&str>) -> Result<Option<String>, AuthError> {
        if self.store.token_count().await? > 0 {
            return Ok(None);
        }
        if let Some(secret) = given {
            if secret.len() < 16 {
                return Err(AuthError::Invalid("BERTH_ADMIN_TOKEN: must be at least 16 characters".into()));
            }
        }
        let secret = given.map(str::to_string).unwrap_or_else(new_secret);
        let (id, hash) = (new_token_id(), sha256(&secret));
        let row = NewTokenRow { id: &id, secret_sha256: &hash, user: "admin", role: Role::Admin, label: Some("bootstrap"), created_by: "berth", at_us: now_us() };
        self.store.insert(&row).await?;
        Ok(given.is_none().then_some(secret))
    }

    /// The caller a bearer token stands for; `None` when it is unknown or revoked.
    pub async fn by_token(&self, secret: &str) -> Result<Option<Caller>, sqlx::Error> {
        let Some(t) = self.store.token_owner(&sha256(secret)).await? else { return Ok(None) };
        // Last use is kept to the minute, so a busy client does not write on every call.
        let now = now_us();
        if t.last_used_at_us.is_none_or(|last| now - last > 60_000_000) {
            self.store.touch(&t.id, now).await?;
        }
        Ok(Some(Caller { user: t.user, role: t.role, via: Via::Token, token_id: Some(t.id) }))
    }

    /// The caller a session cookie stands for; `None` when it expired or its token was revoked.
    pub async fn by_session(&self, cookie: &str) -> Result<Option<Caller>, sqlx::Error> {
        let Some(t) = self.store.session_owner(&sha256(cookie), now_us()).await? else { return Ok(None) };
        Ok(Some(Caller { user: t.user, role: t.role, via: Via::Session, token_id: Some(t.id) }))
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
        let detail = format!("signed in to the dashboard as {} ({})", caller.user, caller.role);
        let token = caller.token_id.clone().unwrap_or_default();
        let audit = AuditRecord { actor: &caller.user, action: "session.signin", target: &token, detail };
        self.store.open_session(&sha256(&cookie), &token, now, now + SESSION_TTL.as_micros() as i64, &audit).await?;
        Ok(Some((cookie, caller)))
    }

    /// Ends the session of `cookie` (nothing when there is none).
    pub async fn sign_out(&self, cookie: &str) -> Result<(), sqlx::Error> {
        self.store.close_session(&sha256(cookie)).await
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
        let (id, hash) = (new_token_id(), sha256(&secret));
        let row = NewTokenRow { id: &id, secret_sha256: &hash, user: &new.user, role: new.role, label, created_by: &caller.user, at_us: now_us() };
        let detail = format!("created a token for {} with the {} role{}", new.user, new.role, label.map(|l| format!(" ({l})")).unwrap_or_default());
        let token = self.store.create(&row, detail).await?;
        Ok(CreatedToken { token, secret })
    }

    /// Every token, newest first (revoked ones too, marked).
    pub async fn tokens(&self, caller: &Caller) -> Result<Vec<TokenInfo>, AuthError> {
        caller.require(Role::Admin, "listing tokens")?;
        Ok(self.store.tokens().await?)
    }

    /// Revokes token `id` at once: its next request is refused and its sessions end.
    pub async fn revoke(&self, caller: &Caller, id: &str) -> Result<TokenInfo, AuthError> {
        caller.require(Role::Admin, "revoking tokens")?;
        if caller.token_id.as_deref() == Some(id) {
            return Err(AuthError::Invalid(format!(
                "token {id} is the one this request is signed in with; revoke it with another admin token so nobody locks themselves out"
            )));
        }
        let detail = |t: &TokenInfo| format!("revoked the token of {} ({} role)", t.user, t.role);
        self.store.revoke(id, &caller.user, now_us(), detail).await?.ok_or_else(|| AuthError::NotFound(id.to_string()))
    }

    /// Records `record` on its own (for changes made elsewhere, e.g. by the admission loop).
    pub async fn record(&self, record: AuditRecord<'_>) {
        if let Err(e) = self.store.record(&record).await {
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
        Ok(self.store.audit(action, actor, cursor, limit).await?)
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
