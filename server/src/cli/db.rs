//! `berth db backup|restore`: the two commands that open the database themselves, like
//! `serve`, rather than asking a server. See [`crate::store::backup`].

use std::path::PathBuf;

use anyhow::Result;
use clap::Subcommand;

use crate::store::backup;

/// `berth db …`.
#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Write a consistent copy of the SQLite database to FILE; safe while the server runs.
    /// (For PostgreSQL, use pg_dump.)
    Backup {
        /// The new file; an existing one is never overwritten.
        file: PathBuf,
        /// The database to copy, as `berth serve` takes it.
        #[arg(long, env = "BERTH_DATABASE_URL", default_value = "sqlite://data/berth.db")]
        database_url: String,
    },
    /// Put a backup in place as the SQLite database, migrated to this version of Berth.
    /// Stop the server first.
    Restore {
        /// A file written by `berth db backup`.
        file: PathBuf,
        /// The database to restore into, as `berth serve` takes it.
        #[arg(long, env = "BERTH_DATABASE_URL", default_value = "sqlite://data/berth.db")]
        database_url: String,
        /// Replace an existing database (kept beside it as NAME.before-restore-TIMESTAMP).
        #[arg(long)]
        replace: bool,
    },
}

/// Runs a `db` command; the exit code.
pub async fn run_db(command: &DbCommand) -> Result<i32> {
    match command {
        DbCommand::Backup { file, database_url } => {
            let copied = backup::backup(database_url, file).await?;
            println!("backed up {} to {} ({}, schema version {})", database_url, file.display(), size(copied.bytes), copied.schema);
        }
        DbCommand::Restore { file, database_url, replace } => {
            let copied = backup::restore(database_url, file, *replace).await?;
            println!("restored {} into {} (schema version {}, now migrated to this version)", file.display(), database_url, copied.schema);
            if let Some(kept) = copied.kept {
                println!("the database it replaced is kept as {}", kept.display());
            }
        }
    }
    Ok(0)
}

fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MB", b as f64 / f64::from(1 << 20)),
        b => format!("{:.1} kB", b as f64 / 1024.0),
    }
}
