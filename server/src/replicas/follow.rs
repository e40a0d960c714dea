//! A follower: what the runtime asks of the loop, answered without one. Jobs stored here
//! wake the leader, commands go to it and wait for its answer, and inspections read a
//! view of the stored unfinished jobs and the leader's published waiting list (read again
//! after another replica changed them).

use std::sync::atomic::Ordering;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::notify::{self, Op, Request};
use super::Parts;
use crate::admission::{Cmd, LoopError, State, Waiting};
use crate::backends::Exit;
use crate::store::jobs::{JobRow, JobStoreError};

/// Longest a follower waits for the leader to answer a command.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// Serves as a follower until this replica takes the lease (its epoch), or until the
/// server shuts down (`None`).
pub(super) async fn follow(p: &Parts, cmds: &mut mpsc::UnboundedReceiver<Cmd>, exits: &mut mpsc::UnboundedReceiver<Exit>) -> Option<i64> {
    let mut view: Option<State> = None;
    let mut attempt = tokio::time::interval(p.lease.length / 6);
    attempt.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut warned = false;
    loop {
        tokio::select! {
            cmd = cmds.recv() => match cmd {
                Some(cmd) => on_command(p, cmd, &mut view).await,
                None => return None,
            },
            // Ends of runs this replica started while it led: the leader adopts those runs.
            Some(_) = exits.recv() => {}
            _ = attempt.tick() => match p.lease.try_acquire().await {
                Ok(Some(epoch)) => return Some(epoch),
                Ok(None) => warned = false,
                Err(e) => {
                    if !std::mem::replace(&mut warned, true) {
                        tracing::warn!(error = %e, "cannot read the leader lease; trying again");
                    }
                }
            },
        }
    }
}

async fn on_command(p: &Parts, cmd: Cmd, view: &mut Option<State>) {
    match cmd {
        Cmd::Enqueue(rows) => {
            let ids: Vec<String> = rows.into_iter().map(|r| r.id).collect();
            if let Err(e) = notify::wake_for(&p.pool, &ids).await {
                // Stored all the same: the leader reads them when it next catches up.
                tracing::warn!(error = %e, jobs = ids.len(), "cannot wake the leader for new jobs");
            }
        }
        Cmd::Load(ids) => {
            let _ = notify::wake_for(&p.pool, &ids).await;
        }
        // The leader reads a stage's limit with its jobs.
        Cmd::Stage { .. } => {}
        Cmd::Cancel { id, by, reply } => ask_leader(p, id, by, Op::Cancel, reply),
        Cmd::Priority { id, priority, by, reply } => ask_leader(p, id, by, Op::Priority(priority), reply),
        Cmd::Hold { id, hold, by, reply } => ask_leader(p, id, by, Op::Hold(hold), reply),
        Cmd::Inspect(f) => {
            if view.is_none() || p.stale.swap(false, Ordering::Relaxed) {
                match read_view(p).await {
                    Ok(state) => *view = Some(state),
                    Err(e) => {
                        p.stale.store(true, Ordering::Relaxed);
                        tracing::warn!(error = %e, "cannot read the unfinished jobs");
                        return; // the asker hears the loop is not there
                    }
                }
            }
            if let Some(state) = view.as_ref() {
                f(state);
            }
        }
    }
}

/// The stored unfinished jobs, with the waiting list the leader published.
async fn read_view(p: &Parts) -> Result<State, JobStoreError> {
    let rows = p.store.load_unfinished().await?;
    let waiting = Waiting::from_published(&p.store.published_waiting().await?);
    let nodes = p.shared.read().unwrap_or_else(|e| e.into_inner()).nodes.as_ref().clone();
    Ok(State::mirror(rows, &p.config.active(), nodes, waiting))
}

/// Numbers this replica's requests.
static NEXT: AtomicU64 = AtomicU64::new(1);

/// Sends a command to the leader and answers `reply` with the job as the leader left it.
fn ask_leader(p: &Parts, id: String, by: String, op: Op, reply: oneshot::Sender<Result<JobRow, LoopError>>) {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = oneshot::channel();
    p.awaited.lock().unwrap_or_else(|e| e.into_inner()).insert(n, tx);
    let (pool, store, awaited) = (p.pool.clone(), p.store.clone(), Arc::clone(&p.awaited));
    let req = Request { from: p.lease.instance().to_string(), n, id: id.clone(), by, op };
    tokio::spawn(async move {
        let payload = format!("cmd:{}", serde_json::to_string(&req).unwrap_or_default());
        let answer = match notify::send(&pool, "berth_wake", &payload).await {
            Err(e) => Err(LoopError::Store(e.to_string())),
            Ok(()) => match tokio::time::timeout(ANSWER_WITHIN, rx).await {
                Ok(Ok(None)) => store.get(&id).await.map_err(LoopError::from),
                Ok(Ok(Some(refusal))) => Err(notify::loop_error(refusal)),
                Ok(Err(_)) | Err(_) => Err(LoopError::Stopped),
            },
        };
        awaited.lock().unwrap_or_else(|e| e.into_inner()).remove(&n);
        let _ = reply.send(answer);
    });
}
