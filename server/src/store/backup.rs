//! Backups of a SQLite database: a consistent copy taken while the server runs (SQLite's
//! `VACUUM INTO`, which reads one snapshot and so never copies half a transaction), and a
//! restore that builds the new file beside the database, migrates it, and only then swaps it
//! in, keeping the file it replaces. PostgreSQL has its own tools (`pg_dump`, `pg_restore`).

use std::path::{Path, PathBuf};
use std::str::FromStr;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, SqliteConnection};

use super::{sqlite_path, Db, DbKind, SQLITE_MIGRATOR};

/// What a backup or a restore did, for the command line to report.
#[derive(Debug)]
pub struct Copied {
    pub bytes: u64,
    /// The newest migration the copy had when it was read.
    pub schema: i64,
    /// Restore only: where the database it replaced was moved.
    pub kept: Option<PathBuf>,
}

/// Why a backup or restore was refused or failed; each says what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error(
        "the database is PostgreSQL: back it up with `pg_dump --format=custom --file=FILE URL` \
         and restore with `pg_restore --clean --dbname=URL FILE` (see docs/operations.md)"
    )]
    Postgres,
    #[error("an in-memory SQLite database cannot be backed up or restored")]
    InMemory,
    #[error("no database at {0}: check --database-url (BERTH_DATABASE_URL)")]
    NoDatabase(String),
    #[error("{0} already exists: a backup never overwrites a file, choose a new name")]
    TargetExists(String),
    #[error("{0} does not exist")]
    NoBackup(String),
    #[error("{0} is not a Berth database (no migration table): {1}")]
    NotBerth(String, String),
    #[error("{path} was written by a newer Berth (schema version {found}; this binary knows up to {known}): restore it with that version")]
    Newer { path: String, found: i64, known: i64 },
    #[error(
        "{0} exists: pass --replace to put the backup in its place (stop the server first; \
         the current file is kept beside it)"
    )]
    WouldReplace(String),
    #[error("a berth serve runs on {0}: stop it before restoring")]
    InUse(String),
    #[error("{what}: {source}")]
    Sqlite { what: String, source: sqlx::Error },
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error(transparent)]
    Db(#[from] super::DbError),
}

/// Writes a consistent copy of the SQLite database at `url` to `file`, which must not exist.
/// Safe while a server uses the database: the copy is one read transaction.
pub async fn backup(url: &str, file: &Path) -> Result<Copied, BackupError> {
    let db = database_file(url)?;
    if !db.exists() {
        return Err(BackupError::NoDatabase(db.display().to_string()));
    }
    if file.exists() {
        return Err(BackupError::TargetExists(file.display().to_string()));
    }
    let mut conn = open_read_only(&db).await?;
    let schema = schema_version(&mut conn, &db).await?;
    vacuum_into(&mut conn, file, &format!("cannot write the backup {}", file.display())).await?;
    let bytes = file_size(file)?;
    Ok(Copied { bytes, schema, kept: None })
}

/// Puts the backup `file` in place as the SQLite database at `url`, migrated to this binary's
/// schema. An existing database is replaced only with `replace`, and then kept as
/// `NAME.before-restore-TIMESTAMP`. Nothing is changed unless the new file is complete.
pub async fn restore(url: &str, file: &Path, replace: bool) -> Result<Copied, BackupError> {
    let db = database_file(url)?;
    if !file.exists() {
        return Err(BackupError::NoBackup(file.display().to_string()));
    }
    if db.exists() && !replace {
        return Err(BackupError::WouldReplace(db.display().to_string()));
    }
    // Held until the swap is done: a server running on the database makes the restore
    // refuse, and none may start on it meanwhile. (No database, no server on it.)
    let _lock = match db.exists() {
        true => super::lock_sqlite(url).map_err(|e| match e {
            super::DbError::SqliteInUse(path) => BackupError::InUse(path),
            other => other.into(),
        })?,
        false => None,
    };
    let mut source = open_read_only(file).await?;
    let schema = schema_version(&mut source, file).await?;
    let known = SQLITE_MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
    if schema > known {
        return Err(BackupError::Newer { path: file.display().to_string(), found: schema, known });
    }
    if let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| BackupError::Io { what: format!("cannot create {}", dir.display()), source })?;
    }
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let fresh = with_suffix(&db, &format!(".restoring-{stamp}"));
    let result = build_restored(&mut source, &fresh).await;
    source.close().await.ok();
    if let Err(e) = result {
        remove_sqlite_files(&fresh);
        return Err(e);
    }
    let kept = if db.exists() { Some(move_aside(&db, &format!(".before-restore-{stamp}"))?) } else { None };
    std::fs::rename(&fresh, &db).map_err(|source| BackupError::Io { what: format!("cannot move the restored file to {}", db.display()), source })?;
    Ok(Copied { bytes: file_size(&db)?, schema, kept })
}

/// Copies `source` into the new file `fresh` and runs this binary's migrations on it.
async fn build_restored(source: &mut SqliteConnection, fresh: &Path) -> Result<(), BackupError> {
    vacuum_into(source, fresh, &format!("cannot write {}", fresh.display())).await?;
    let migrated = Db::connect(&format!("sqlite://{}", fresh.display())).await?;
    migrated.pool.close().await;
    Ok(())
}

/// The SQLite file a `sqlite:` URL names; PostgreSQL and in-memory URLs are refused.
fn database_file(url: &str) -> Result<PathBuf, BackupError> {
    match DbKind::from_str(url)? {
        DbKind::Postgres => Err(BackupError::Postgres),
        DbKind::Sqlite => sqlite_path(url).ok_or(BackupError::InMemory),
    }
}

async fn open_read_only(path: &Path) -> Result<SqliteConnection, BackupError> {
    SqliteConnectOptions::new()
        .filename(path)
        .read_only(true)
        .connect()
        .await
        .map_err(|source| BackupError::Sqlite { what: format!("cannot open {}", path.display()), source })
}

/// The newest applied migration, which also tells a Berth database from any other file.
async fn schema_version(conn: &mut SqliteConnection, path: &Path) -> Result<i64, BackupError> {
    let name = path.display().to_string();
    sqlx::query_scalar::<_, Option<i64>>("SELECT MAX(version) FROM _sqlx_migrations WHERE success")
        .fetch_one(conn)
        .await
        .map_err(|e| BackupError::NotBerth(name.clone(), e.to_string()))?
        .ok_or_else(|| BackupError::NotBerth(name, "no migration applied".into()))
}

async fn vacuum_into(conn: &mut SqliteConnection, target: &Path, what: &str) -> Result<(), BackupError> {
    let target = target.to_str().ok_or_else(|| BackupError::Io {
        what: what.to_string(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path is not UTF-8"),
    })?;
    sqlx::query("VACUUM INTO $1")
        .bind(target)
        .execute(conn)
        .await
        .map(|_| ())
        .map_err(|source| BackupError::Sqlite { what: what.to_string(), source })
}

/// Moves `db` and its WAL and shared-memory files to `db` + `suffix`; the new main file.
fn move_aside(db: &Path, suffix: &str) -> Result<PathBuf, BackupError> {
    let kept = with_suffix(db, suffix);
    for extra in ["", "-wal", "-shm"] {
        let (from, to) = (with_suffix(db, extra), with_suffix(&kept, extra));
        if from.exists() {
            std::fs::rename(&from, &to).map_err(|source| BackupError::Io { what: format!("cannot move {} aside", from.display()), source })?;
        }
    }
    Ok(kept)
}

fn remove_sqlite_files(db: &Path) {
    for extra in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(with_suffix(db, extra));
    }
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn file_size(path: &Path) -> Result<u64, BackupError> {
    std::fs::metadata(path).map(|m| m.len()).map_err(|source| BackupError::Io { what: format!("cannot read {}", path.display()), source })
}
