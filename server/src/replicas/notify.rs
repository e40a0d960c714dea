//! What replicas tell each other through PostgreSQL's LISTEN/NOTIFY, and the listener.
//!
//! Channels:
//! - `berth_wake` (to the leader): `load:ID,ID…` jobs a follower stored; `cmd:{…}` a
//!   cancel, priority change, hold or release made on a follower ([`Request`]); `sweep`
//!   from a replica whose term just ended (jobs it took in may be unknown to the leader);
//! - `berth_reply` (to one follower): the leader's answer to a `cmd` ([`Reply`]);
//! - `berth_changed`: jobs or events were written (sent in the writing transaction by the
//!   job store), so live pages on every replica refresh;
//! - `berth_config`: a config was applied (sent by the config store), so every replica
//!   puts it in force.
//!
//! A notification is not stored: one sent while a replica's connection is down is lost.
//! So after each (re)connection the listener catches up: live views refresh, the config is
//! read again and the leader reads every unfinished job it does not hold.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sqlx::postgres::{PgListener, PgNotification};
use tokio::sync::{mpsc, oneshot};

use super::lease::Lease;
use crate::admission::{Cmd, LoopError};
use crate::services::config::ConfigService;
use crate::store::jobs::JobStore;
use crate::store::AnyPool;

const CHANNELS: [&str; 4] = ["berth_wake", "berth_reply", "berth_changed", "berth_config"];

/// A notification's payload stays under PostgreSQL's limit of 8000 bytes.
const MAX_PAYLOAD: usize = 7000;

/// A command a follower asks the leader to carry out.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    /// The asking replica's instance, and its number for the request.
    pub from: String,
    pub n: u64,
    pub id: String,
    pub by: String,
    pub op: Op,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Cancel,
    Priority(i64),
    Hold(bool),
}

/// The leader's answer to a [`Request`]: `None` when done, else the loop's refusal.
#[derive(Debug, Serialize, Deserialize)]
pub struct Reply {
    pub to: String,
    pub n: u64,
    pub error: Option<(String, String)>,
}

/// Answers awaited by this replica's followers' requests, by number.
pub type Awaited = Arc<Mutex<HashMap<u64, oneshot::Sender<Option<(String, String)>>>>>;

/// What the listener acts on.
#[derive(Clone)]
pub struct Listening {
    pub url: String,
    pub pool: AnyPool,
    pub lease: Arc<Lease>,
    pub store: JobStore,
    pub config: Arc<ConfigService>,
    pub cmds: mpsc::UnboundedSender<Cmd>,
    pub awaited: Awaited,
    /// Set on every change another replica wrote: a follower's view is read again.
    pub stale: Arc<std::sync::atomic::AtomicBool>,
}

/// Sends one notification.
pub async fn send(pool: &AnyPool, channel: &str, payload: &str) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT pg_notify($1, $2)").bind(channel).bind(payload).execute(pool).await.map(|_| ())
}

/// Tells the leader about jobs stored here, in as few notifications as fit.
pub async fn wake_for(pool: &AnyPool, ids: &[String]) -> Result<(), sqlx::Error> {
    let mut payload = String::from("load:");
    for id in ids {
        if payload.len() + id.len() + 1 > MAX_PAYLOAD {
            send(pool, "berth_wake", &payload).await?;
            payload.truncate("load:".len());
        }
        if payload.len() > "load:".len() {
            payload.push(',');
        }
        payload.push_str(id);
    }
    if payload.len() > "load:".len() {
        send(pool, "berth_wake", &payload).await?;
    }
    Ok(())
}

/// Listens until the process ends, connecting again whenever the connection is lost.
pub async fn listen(l: Listening) {
    loop {
        let mut listener = match connect(&l.url).await {
            Ok(listener) => listener,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for other replicas' notices; trying again");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        catch_up(&l).await;
        // `Ok(None)` or an error: the connection was lost; connect and catch up.
        while let Ok(Some(n)) = listener.try_recv().await {
            on_notice(&l, n).await;
        }
        tracing::warn!("lost the connection other replicas' notices come on; connecting again");
    }
}

async fn connect(url: &str) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect(url).await?;
    listener.listen_all(CHANNELS).await?;
    Ok(listener)
}

/// After a (re)connection: whatever notice was missed is made up for.
async fn catch_up(l: &Listening) {
    l.store.changed_elsewhere();
    l.stale.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Err(e) = l.config.refresh().await {
        tracing::warn!(error = %e, "cannot read the active config again");
    }
    if l.lease.is_leading() {
        sweep(l.store.clone(), l.cmds.clone());
    }
}

/// The leader reads every unfinished job and takes in those it does not hold (on a task:
/// the listener goes on meanwhile).
fn sweep(store: JobStore, cmds: mpsc::UnboundedSender<Cmd>) {
    tokio::spawn(async move {
        match store.load_unfinished().await {
            Ok(rows) => {
                let _ = cmds.send(Cmd::Load(rows.into_iter().map(|r| r.id).collect()));
            }
            Err(e) => tracing::warn!(error = %e, "cannot read the unfinished jobs to catch up"),
        }
    });
}

async fn on_notice(l: &Listening, n: PgNotification) {
    match n.channel() {
        // Also on the leader: a job a follower stored may just wait, with nothing the
        // leader writes for it (its own writes come back too; the stream coalesces them).
        "berth_changed" => {
            l.store.changed_elsewhere();
            l.stale.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        "berth_config" => {
            if let Err(e) = l.config.refresh().await {
                tracing::warn!(error = %e, "cannot read the config another replica applied");
            }
        }
        "berth_reply" => {
            let Ok(reply) = serde_json::from_str::<Reply>(n.payload()) else { return };
            if reply.to == l.lease.instance() {
                let waiting = l.awaited.lock().unwrap_or_else(|e| e.into_inner()).remove(&reply.n);
                if let Some(tx) = waiting {
                    let _ = tx.send(reply.error);
                }
            }
        }
        "berth_wake" if l.lease.is_leading() => on_wake(l, n.payload()),
        _ => {}
    }
}

/// The leader hears of jobs stored elsewhere, or of a command made there.
fn on_wake(l: &Listening, payload: &str) {
    if payload == "sweep" {
        sweep(l.store.clone(), l.cmds.clone());
        return;
    }
    if let Some(ids) = payload.strip_prefix("load:") {
        let ids: Vec<String> = ids.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect();
        let _ = l.cmds.send(Cmd::Load(ids));
        return;
    }
    let Some(Ok(req)) = payload.strip_prefix("cmd:").map(serde_json::from_str::<Request>) else {
        tracing::warn!(payload, "an unreadable notice on berth_wake");
        return;
    };
    let (cmds, pool) = (l.cmds.clone(), l.pool.clone());
    tokio::spawn(async move {
        let (tx, rx) = oneshot::channel();
        let (id, by) = (req.id.clone(), req.by.clone());
        let cmd = match req.op {
            Op::Cancel => Cmd::Cancel { id, by, reply: tx },
            Op::Priority(priority) => Cmd::Priority { id, priority, by, reply: tx },
            Op::Hold(hold) => Cmd::Hold { id, hold, by, reply: tx },
        };
        let error = match cmds.send(cmd) {
            Err(_) => Some(refusal(&LoopError::Stopped)),
            Ok(()) => match rx.await {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(refusal(&e)),
                Err(_) => Some(refusal(&LoopError::Stopped)),
            },
        };
        let reply = Reply { to: req.from, n: req.n, error };
        let payload = serde_json::to_string(&reply).unwrap_or_default();
        if let Err(e) = send(&pool, "berth_reply", &payload).await {
            tracing::warn!(error = %e, "cannot answer another replica");
        }
    });
}

/// A loop refusal as a reply carries it (kind, message).
fn refusal(e: &LoopError) -> (String, String) {
    let kind = match e {
        LoopError::NotLive(_) => "not_live",
        LoopError::Invalid(_) => "invalid",
        LoopError::Store(_) => "store",
        LoopError::Stopped => "stopped",
    };
    let message = match e {
        LoopError::NotLive(id) => id.clone(),
        LoopError::Invalid(m) | LoopError::Store(m) => m.clone(),
        LoopError::Stopped => String::new(),
    };
    (kind.to_string(), message)
}

/// The loop refusal a reply carried.
pub fn loop_error((kind, message): (String, String)) -> LoopError {
    match kind.as_str() {
        "not_live" => LoopError::NotLive(message),
        "invalid" => LoopError::Invalid(message),
        "store" => LoopError::Store(message),
        _ => LoopError::Stopped,
    }
}
