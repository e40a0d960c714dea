//! The store: one pool over SQLite or PostgreSQL, chosen by the URL, migrated on connect,
//! and every SQL statement of the server, one module per kind of data.
//!
//! Queries are written once in the SQL both engines accept (`$1` placeholders, `RETURNING`,
//! `BIGINT` timestamps in microseconds), and run through sqlx's `Any` driver. The exception:
//! multi-row statements use `?` on SQLite (see [`jobs`]), which is quadratic in the number
//! of `$N` parameters.

pub mod auth;
pub mod backup;
pub mod config;
pub mod jobs;
pub mod packages;

use std::str::FromStr;

use sqlx::any::AnyPoolOptions;

/// A pool over whichever engine the URL chose.
pub type AnyPool = sqlx::Pool<sqlx::Any>;
use sqlx::migrate::Migrator;

static SQLITE_MIGRATOR: Migrator = sqlx::migrate!("../migrations/sqlite");
static POSTGRES_MIGRATOR: Migrator = sqlx::migrate!("../migrations/postgres");

/// Which engine a [`Db`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbKind {
    Sqlite,
    Postgres,
}

/// A migrated connection pool.
#[derive(Debug, Clone)]
pub struct Db {
    pub pool: AnyPool,
    pub kind: DbKind,
}

/// Failure to open or migrate the database.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("unsupported database URL `{0}`: use sqlite://PATH or postgres://…")]
    UnsupportedUrl(String),
    #[error("cannot create the directory for the SQLite file {path}: {source}")]
    CreateDir { path: String, source: std::io::Error },
    #[error("cannot connect to the database: {0}")]
    Connect(#[source] sqlx::Error),
    #[error("another `berth serve` already runs on the SQLite database {0}; SQLite allows one server process. Stop it, or run several replicas on PostgreSQL (docs/operations.md)")]
    SqliteInUse(String),
    #[error("cannot lock {path}: {source}")]
    Lock { path: String, source: std::io::Error },
    #[error("cannot migrate the database: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

impl FromStr for DbKind {
    type Err = DbError;

    fn from_str(url: &str) -> Result<Self, DbError> {
        if url.starts_with("sqlite:") {
            Ok(DbKind::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(DbKind::Postgres)
        } else {
            Err(DbError::UnsupportedUrl(redact_url(url)))
        }
    }
}

impl Db {
    /// Opens the database at `url` (creating a SQLite file and its directory when missing)
    /// and runs the migrations.
    pub async fn connect(url: &str) -> Result<Db, DbError> {
        sqlx::any::install_default_drivers();
        let kind: DbKind = url.parse()?;
        let url = match kind {
            DbKind::Sqlite => sqlite_url(url)?,
            DbKind::Postgres => url.to_string(),
        };
        // A SQLite connection is a file handle that cannot go stale, so it is not pinged
        // before each use (a round trip to its worker thread on every transaction, the
        // admission loop's commit included); a PostgreSQL one can, so it is.
        let options = AnyPoolOptions::new()
            .max_connections(match kind {
                DbKind::Sqlite => 4,
                DbKind::Postgres => 10,
            })
            .test_before_acquire(kind == DbKind::Postgres);
        let options = if kind == DbKind::Sqlite {
            // WAL lets readers proceed while one writer commits; concurrent writers wait on
            // the busy timeout (sqlx's default, 5 s) instead of failing. `synchronous =
            // NORMAL` in WAL mode survives a killed process (only power loss can drop the
            // last commits) and saves an fsync per transaction on the admission hot path.
            // Reads go through a memory map of the database file (up to 256 MiB of address
            // space; the pages are the OS's cache, not this process's): an accounting
            // summary that joins 100,000 ended jobs to their labels took 120 or 280 ms by
            // turns without the map (bench `usage`) and 100 ms with it.
            options.after_connect(|conn, _meta| {
                Box::pin(async move {
                    use sqlx::Executor;
                    conn.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA mmap_size = 268435456;").await?;
                    Ok(())
                })
            })
        } else {
            // A transaction left open by a process that stopped in it (SIGSTOP, a VM
            // paused, a partition) holds its locks, among them the leader lease row that
            // every fenced write reads `FOR SHARE`: another replica's takeover would wait
            // for it for ever. PostgreSQL ends such a session after this long.
            options.after_connect(|conn, _meta| {
                Box::pin(async move {
                    use sqlx::Executor;
                    conn.execute(sqlx::AssertSqlSafe(format!("SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_MS}"))).await?;
                    Ok(())
                })
            })
        };
        let pool = options.connect(&url).await.map_err(DbError::Connect)?;
        let migrator = match kind {
            DbKind::Sqlite => &SQLITE_MIGRATOR,
            DbKind::Postgres => &POSTGRES_MIGRATOR,
        };
        migrator.run(&pool).await?;
        Ok(Db { pool, kind })
    }
}

/// How long (ms) a PostgreSQL session may sit idle inside a transaction before the server
/// ends it. Berth's transactions run their statements back to back.
const IDLE_IN_TRANSACTION_MS: u64 = 5_000;

/// The path and the query of a `sqlite:` URL.
fn sqlite_parts(url: &str) -> (&str, &str) {
    let rest = url.trim_start_matches("sqlite:").trim_start_matches("//");
    rest.split_once('?').unwrap_or((rest, ""))
}

/// The file a `sqlite:` URL names; `None` for an in-memory database.
pub fn sqlite_path(url: &str) -> Option<std::path::PathBuf> {
    match sqlite_parts(url).0 {
        "" | ":memory:" => None,
        path => Some(path.into()),
    }
}

/// Held by the one `berth serve` on a SQLite database (released when the process ends).
#[derive(Debug)]
pub struct SqliteLock {
    _file: std::fs::File,
}

/// Takes the lock file beside a SQLite database (`FILE.lock`), so that a second `berth
/// serve` on it is refused: SQLite runs one server; several replicas need PostgreSQL.
/// `None` for PostgreSQL and in-memory databases.
pub fn lock_sqlite(url: &str) -> Result<Option<SqliteLock>, DbError> {
    if url.parse::<DbKind>()? != DbKind::Sqlite {
        return Ok(None);
    }
    let Some(path) = sqlite_path(url) else { return Ok(None) };
    let path = path.display().to_string();
    let lock = format!("{path}.lock");
    if let Some(dir) = std::path::Path::new(&lock).parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| DbError::CreateDir { path: path.clone(), source })?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock)
        .map_err(|source| DbError::Lock { path: lock.clone(), source })?;
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor this function owns; no memory is passed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(DbError::SqliteInUse(path));
        }
        return Err(DbError::Lock { path: lock, source: e });
    }
    Ok(Some(SqliteLock { _file: file }))
}

/// Adds `mode=rwc` so SQLite creates the file, and creates its directory.
fn sqlite_url(url: &str) -> Result<String, DbError> {
    let (path, query) = sqlite_parts(url);
    if path == ":memory:" {
        return Ok("sqlite::memory:".into());
    }
    if !path.is_empty() {
        if let Some(dir) = std::path::Path::new(path).parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|source| DbError::CreateDir { path: path.to_string(), source })?;
        }
    }
    let mut query = query.to_string();
    if !query.contains("mode=") {
        query = if query.is_empty() { "mode=rwc".into() } else { format!("{query}&mode=rwc") };
    }
    Ok(format!("sqlite://{path}?{query}"))
}

/// The URL with any password replaced by `***`, safe to log or show.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let Some((userinfo, host)) = rest.split_once('@') else { return url.to_string() };
    match userinfo.split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact_url("postgres://berth:s3cret@db:5432/berth"), "postgres://berth:***@db:5432/berth");
        assert_eq!(redact_url("postgres://db/berth"), "postgres://db/berth");
        assert_eq!(redact_url("sqlite://data/berth.db"), "sqlite://data/berth.db");
    }

    #[test]
    fn sqlite_urls_get_create_mode() {
        let dir = std::env::temp_dir().join(format!("berth-db-test-{}", std::process::id()));
        let url = format!("sqlite://{}/x/berth.db", dir.display());
        let got = sqlite_url(&url).unwrap();
        assert!(got.ends_with("/x/berth.db?mode=rwc"), "{got}");
        assert!(dir.join("x").is_dir());
        assert_eq!(sqlite_url("sqlite::memory:").unwrap(), "sqlite::memory:");
        let _ = std::fs::remove_dir_all(dir);
    }
}
