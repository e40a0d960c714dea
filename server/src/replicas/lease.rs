//! The leader lease: one row in PostgreSQL (`leader_lease`), taken when it lapsed, renewed
//! by its holder, with an epoch that each takeover bumps (the fencing token).
//!
//! Times in the row are PostgreSQL's clock, so replicas' clocks need not agree. The holder
//! keeps its own bound too (a monotonic instant): the lease is surely held until the last
//! renewal's send time plus the lease length, which a process paused past its lease sees
//! at once, before it hears from the database.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::store::AnyPool;

/// PostgreSQL's clock in microseconds (the lease row's times).
const NOW_US: &str = "(extract(epoch from clock_timestamp()) * 1000000)::bigint";

/// One replica's side of the lease.
pub struct Lease {
    pool: AnyPool,
    /// The replica's name, shown as the leader (`--replica-name`, or host:port).
    pub name: String,
    /// This process (a restarted replica with the same name is another instance).
    instance: String,
    /// How long a renewal holds the lease.
    pub length: Duration,
    /// The epoch held, 0 when following.
    epoch: Mutex<i64>,
    /// Until when the lease is surely held (see the module doc).
    pub until: Arc<Mutex<Instant>>,
    /// True while this replica leads.
    pub leading: watch::Sender<bool>,
}

impl Lease {
    pub fn new(pool: AnyPool, name: String, length: Duration) -> Lease {
        let mut bytes = [0u8; 8];
        let _ = getrandom::fill(&mut bytes);
        Lease {
            pool,
            name,
            instance: format!("{}-{:016x}", std::process::id(), u64::from_le_bytes(bytes)),
            length,
            epoch: Mutex::new(0),
            until: Arc::new(Mutex::new(Instant::now())),
            leading: watch::channel(false).0,
        }
    }

    /// This process's id in the lease row.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    pub fn is_leading(&self) -> bool {
        *self.leading.borrow()
    }

    /// Takes the lease when it has lapsed: the new epoch, or `None` while another holds it.
    pub async fn try_acquire(&self) -> Result<Option<i64>, sqlx::Error> {
        let sent = Instant::now();
        let sql = format!(
            "UPDATE leader_lease SET holder = $1, instance = $2, epoch = epoch + 1, expires_at_us = {NOW_US} + $3 \
             WHERE id = 1 AND (expires_at_us < {NOW_US} OR instance = $2) RETURNING epoch"
        );
        let epoch: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(&self.name)
            .bind(&self.instance)
            .bind(self.length.as_micros() as i64)
            .fetch_optional(&self.pool)
            .await?;
        if let Some(e) = epoch {
            *lock(&self.epoch) = e;
            *lock(&self.until) = sent + self.length;
            self.leading.send_replace(true);
        }
        Ok(epoch)
    }

    /// Extends the lease; false when another replica took it over.
    pub async fn renew(&self) -> Result<bool, sqlx::Error> {
        let sent = Instant::now();
        let epoch = *lock(&self.epoch);
        let sql = format!("UPDATE leader_lease SET expires_at_us = {NOW_US} + $1 WHERE id = 1 AND epoch = $2 AND instance = $3 RETURNING epoch");
        let held: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(self.length.as_micros() as i64)
            .bind(epoch)
            .bind(&self.instance)
            .fetch_optional(&self.pool)
            .await?;
        if held.is_some() {
            *lock(&self.until) = sent + self.length;
        }
        Ok(held.is_some())
    }

    /// Renews about three times per lease until a renewal is refused or the lease lapses
    /// unrenewed (the database is unreachable); then this replica stops leading.
    pub async fn keep(&self) {
        let mut tick = tokio::time::interval(self.length / 3);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if !self.is_leading() {
                return;
            }
            match self.renew().await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(replica = %self.name, "another replica took the leader lease over");
                    break;
                }
                Err(e) if Instant::now() >= *lock(&self.until) => {
                    tracing::warn!(replica = %self.name, error = %e, "cannot renew the leader lease, and it lapsed");
                    break;
                }
                Err(e) => tracing::warn!(replica = %self.name, error = %e, "cannot renew the leader lease; trying again"),
            }
        }
        self.leading.send_replace(false);
    }

    /// Stops leading and lets the lease lapse now, so another replica takes over at once.
    pub async fn release(&self) {
        let epoch = *lock(&self.epoch);
        *lock(&self.until) = Instant::now();
        let was = self.leading.send_replace(false);
        if !was || epoch == 0 {
            return;
        }
        let done = sqlx::query("UPDATE leader_lease SET expires_at_us = 0 WHERE id = 1 AND epoch = $1 AND instance = $2")
            .bind(epoch)
            .bind(&self.instance)
            .execute(&self.pool)
            .await;
        if let Err(e) = done {
            tracing::warn!(error = %e, "cannot release the leader lease; it lapses by itself");
        }
    }

    /// The replica that leads now, if the lease is held.
    pub async fn leader(&self) -> Result<Option<String>, sqlx::Error> {
        let sql = format!("SELECT holder FROM leader_lease WHERE id = 1 AND expires_at_us >= {NOW_US}");
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).fetch_optional(&self.pool).await
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
