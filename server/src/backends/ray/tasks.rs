//! The backend's background tasks: node refresh, status polling, and keeping then deleting
//! ended jobs in Ray.

use super::*;

pub(super) async fn nodes_task(backend: Weak<RayBackend>) {
    loop {
        let Some(b) = backend.upgrade() else { return };
        let every = b.cfg.nodes_interval;
        let _ = b.refresh_nodes().await;
        drop(b);
        tokio::time::sleep(every).await;
    }
}

/// A saved run waiting to be deleted from Ray.
pub(super) struct ToDelete {
    pub(super) key: String,
    /// When its end was seen (and its copy saved).
    pub(super) since: Instant,
}

/// How often saved runs are checked for deletion.
pub(super) const DELETE_CHECK: Duration = Duration::from_secs(2);

/// How long after its end a run's job is deleted from Ray. Ray's job monitor looks at each
/// supervisor actor every second until it has seen the run end; a job deleted before that
/// is written back by the monitor as `FAILED`, `JOB_SUPERVISOR_ACTOR_DIED` (seen on Ray
/// 2.60). Waiting a fixed time rather than asking Ray about each supervisor keeps the
/// deletion off Ray's dashboard, which is what every submission and status poll waits on.
pub(super) const SETTLE: Duration = Duration::from_secs(10);

/// A saved run Ray still cannot delete after this is left in Ray.
pub(super) const GIVE_UP: Duration = Duration::from_secs(600);

/// Saves ended runs (off the status task: a slot is reused as soon as the run's end is
/// seen, not after its log is copied), then deletes each from Ray once Ray is done with it.
pub(super) async fn keep_task(backend: Weak<RayBackend>, mut ended: UnboundedReceiver<(String, Value)>) {
    let mut waiting: VecDeque<ToDelete> = VecDeque::new();
    let mut check = tokio::time::interval(DELETE_CHECK);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            got = ended.recv() => {
                let Some((key, record)) = got else { return };
                let Some(b) = backend.upgrade() else { return };
                if b.save_ended(&key, record).await {
                    waiting.push_back(ToDelete { key, since: Instant::now() });
                }
            }
            _ = check.tick(), if !waiting.is_empty() => {
                let Some(b) = backend.upgrade() else { return };
                b.delete_settled(&mut waiting).await;
            }
        }
    }
}

pub(super) async fn status_task(backend: Weak<RayBackend>) {
    loop {
        let Some(b) = backend.upgrade() else { return };
        let started = Instant::now();
        let asked = b.poll_once().await;
        tracing::trace!(asked, round_ms = started.elapsed().as_millis() as u64, "Ray status round");
        // The next round after the interval, or later to keep within the request rate.
        let budget = Duration::from_secs_f64(asked as f64 / f64::from(b.cfg.max_polls_per_s.max(1)));
        let wait = b.cfg.poll_interval.max(budget).saturating_sub(started.elapsed());
        drop(b);
        tokio::time::sleep(wait).await;
    }
}
