//! Who may do what: roles, the caller as the server sees it, API tokens and the audit log.
//! Wire types of `/api/v1/whoami`, `/api/v1/tokens` and `/api/v1/audit`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// What a caller may do. Each role includes the ones before it: an editor may also submit,
/// an admin may do everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads everything.
    Viewer,
    /// Also submits jobs and cancels or re-prioritises its own.
    Submitter,
    /// Also applies and rolls back the config.
    Editor,
    /// Also manages tokens, reads the audit log and acts on everyone's jobs.
    Admin,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Viewer, Role::Submitter, Role::Editor, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Submitter => "submitter",
            Role::Editor => "editor",
            Role::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Whether this role includes `needed`.
    pub fn allows(self, needed: Role) -> bool {
        self >= needed
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the caller proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// `Authorization: Bearer` with an API token.
    Token,
    /// The dashboard's session cookie.
    Session,
    /// Nobody: the server runs in anonymous local mode.
    Anonymous,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Token => "token",
            Via::Session => "session",
            Via::Anonymous => "anonymous",
        }
    }
}

/// The caller (`GET /api/v1/whoami`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Whoami {
    pub user: String,
    pub role: Role,
    pub via: Via,
}

impl Whoami {
    /// Whether the caller may cancel or re-prioritise a job submitted by `submitter`.
    pub fn may_act_on(&self, submitter: &str) -> bool {
        self.role.allows(Role::Admin) || (self.role.allows(Role::Submitter) && self.user == submitter)
    }
}

/// An API token as listed; the secret itself is shown once, at creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenInfo {
    pub id: String,
    pub user: String,
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub created_at: DateTime<Utc>,
    pub created_by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_by: Option<String>,
}

/// Body of `POST /api/v1/tokens`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    /// Whom the token identifies: recorded as submitter and config author.
    pub user: String,
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// A freshly created token: `secret` is never shown again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedToken {
    pub token: TokenInfo,
    pub secret: String,
}

/// One audited change: who did what to what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub seq: i64,
    pub at: DateTime<Utc>,
    pub actor: String,
    /// `config.apply`, `config.rollback`, `token.create`, `token.revoke`, `job.cancel`,
    /// `job.priority`, `session.signin`.
    pub action: String,
    /// The version, token or job acted on.
    pub target: String,
    pub detail: String,
}

/// Actions the audit log records.
pub const AUDIT_ACTIONS: [&str; 7] =
    ["config.apply", "config.rollback", "token.create", "token.revoke", "job.cancel", "job.priority", "session.signin"];

/// A page of audit entries, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditPage {
    pub entries: Vec<AuditEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Whether `user` is a usable user id: 1 to 64 characters, letters, digits and `._@-`.
pub fn check_user(user: &str) -> Result<(), String> {
    if user.is_empty() || user.len() > 64 {
        return Err(format!("user: must be 1 to 64 characters, got {}", user.len()));
    }
    if let Some(c) = user.chars().find(|c| !(c.is_ascii_alphanumeric() || "._@-".contains(*c))) {
        return Err(format!("user: `{c}` is not allowed (letters, digits and . _ @ -)"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_include_the_lesser_ones() {
        assert!(Role::Admin.allows(Role::Editor));
        assert!(Role::Editor.allows(Role::Submitter));
        assert!(!Role::Submitter.allows(Role::Editor));
        assert!(!Role::Viewer.allows(Role::Submitter));
        assert_eq!(Role::parse("editor"), Some(Role::Editor));
        assert_eq!(Role::parse("root"), None);
    }

    #[test]
    fn only_owners_and_admins_act_on_jobs() {
        let me = |role| Whoami { user: "ann".into(), role, via: Via::Token };
        assert!(me(Role::Submitter).may_act_on("ann"));
        assert!(!me(Role::Submitter).may_act_on("bob"));
        assert!(!me(Role::Viewer).may_act_on("ann"));
        assert!(me(Role::Admin).may_act_on("bob"));
    }

    #[test]
    fn user_ids_are_plain() {
        assert!(check_user("ann.lee@example-1").is_ok());
        assert!(check_user("").unwrap_err().starts_with("user:"));
        assert!(check_user("a b").unwrap_err().contains('`'));
        assert!(check_user(&"x".repeat(65)).is_err());
    }
}
